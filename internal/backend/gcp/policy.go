/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"slices"
	"strconv"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// DefaultMachineTypes are the machine types a config without
// spec.policy.gcp.machineTypes allows: enough for a proxy (the sizes the
// compositions map to), and a bound on what one team can make the project
// pay for.
var DefaultMachineTypes = []string{"e2-micro", "e2-small", "e2-medium", "e2-standard-2"}

const (
	errFmtPolicy  = "%s %q is not in %s spec.policy.gcp.%s, %s"
	msgFmtAllows  = "which allows %s"
	msgFmtDefault = "which is empty and allows only %s"
	msgNone       = "which is empty and allows none"
)

// WithPolicy makes Create and Update refuse a proxy that p does not allow
// (before they change anything), and Observe report it as not up to date.
// config names the provider config in errors. Without it every list of p
// has its default (see v1alpha1.GCPPolicy).
func WithPolicy(config string, p v1alpha1.GCPPolicy) Option {
	return func(b *Backend) {
		b.config = config
		b.policy = p
	}
}

// rule is one list of the policy: the field of the GCPProxy it bounds, the
// policy list, and what an empty list allows.
type rule struct {
	field, list string
	allowed     []string
	defaults    []string
	// prefixes: entries ending in "/" allow every value they start.
	prefixes bool
}

// check returns a Permanent error unless r allows v.
func (r rule) check(config, v string) error {
	allowed, why := r.allowed, msgFmtAllows
	if len(allowed) == 0 {
		allowed, why = r.defaults, msgFmtDefault
	}
	for _, a := range allowed {
		if v == a || r.prefixes && strings.HasSuffix(a, "/") && strings.HasPrefix(v, a) {
			return nil
		}
	}
	msg := msgNone
	if len(allowed) > 0 {
		q := make([]string, len(allowed))
		for i, a := range allowed {
			q[i] = strconv.Quote(a)
		}
		msg = strings.Replace(why, "%s", strings.Join(q, ", "), 1)
	}
	return backend.Permanent(errors.Errorf(errFmtPolicy, r.field, v, config, r.list, msg))
}

// checkPolicy returns a Permanent error naming the first field of s (as d
// asked for it) that the provider config does not allow, and the rule. It
// makes no call, so a refused proxy changes nothing in the project. The
// address is checked with its labels, in ensureAddress.
func (b *Backend) checkPolicy(s spec, d Desired) error {
	p := b.policy
	type value struct {
		r rule
		v string
	}
	vals := []value{
		{rule{field: "spec.forProvider.image", list: "images", allowed: p.Images, defaults: []string{DefaultImage}, prefixes: true}, s.image},
		{rule{field: "spec.forProvider.machineType", list: "machineTypes", allowed: p.MachineTypes, defaults: DefaultMachineTypes}, s.machineType},
		{rule{field: "spec.forProvider.network", list: "networks", allowed: p.Networks, defaults: []string{DefaultNetwork}}, s.network},
	}
	if s.subnetwork != "" {
		vals = append(vals, value{rule{field: "spec.forProvider.subnetwork", list: "subnetworks", allowed: p.Subnetworks}, s.subnetwork})
	}
	for _, t := range d.Params.NetworkTags {
		vals = append(vals, value{rule{field: "spec.forProvider.networkTags", list: "networkTags", allowed: p.NetworkTags}, t})
	}
	for _, v := range vals {
		if err := v.r.check(b.config, v.v); err != nil {
			return err
		}
	}
	return b.checkServiceAccount(s)
}

// addressListed reports whether the policy lets a proxy claim the
// unlabelled address name.
func (b *Backend) addressListed(name string) bool {
	return slices.Contains(b.policy.Addresses, name)
}
