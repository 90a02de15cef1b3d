/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	gcpv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
)

// GCPDefaultMachineTypes are the machine types a config without
// spec.policy.gcp.machineTypes allows: enough for a proxy (the sizes the
// compositions map to), and a bound on what one team can make the project
// pay for.
var GCPDefaultMachineTypes = []string{"e2-micro", "e2-small", "e2-medium", "e2-standard-2"}

const (
	errFmtGCPPolicy    = "%s %q is not in %s spec.policy.gcp.%s, %s"
	msgFmtGCPAllows    = "which allows %s"
	msgFmtGCPDefault   = "which is empty and allows only %s"
	msgGCPNone         = "which is empty and allows none"
	errFmtSANotAllowed = "spec.forProvider.serviceAccountEmail %s is not in spec.allowedServiceAccounts or spec.policy.gcp.serviceAccounts of %s: a proxy may run only as a service account its provider config allows, since whoever controls the proxy can obtain that account's tokens"
)

// GCP is spec.policy.gcp of one provider config, with the service
// accounts its proxies may attach.
type GCP struct {
	// Config names the provider config in messages, as Kind name or Kind
	// namespace/name.
	Config string
	// Rules are spec.policy.gcp; every empty list has its default.
	Rules gcpv1alpha1.GCPPolicy
	// ServiceAccounts are spec.allowedServiceAccounts and
	// spec.policy.gcp.serviceAccounts: the accounts a proxy may run as.
	ServiceAccounts []string
}

// GCPOf returns the gcp policy of a config's spec, named config.
func GCPOf(spec gcpv1alpha1.ProviderConfigSpec, config string) GCP {
	g := GCP{Config: config}
	if spec.Policy.GCP != nil {
		g.Rules = *spec.Policy.GCP
	}
	g.ServiceAccounts = append(append([]string{}, spec.AllowedServiceAccounts...), g.Rules.ServiceAccounts...)
	return g
}

// gcpRule is one list of the policy: the field of the GCPProxy it bounds,
// the policy list, and what an empty list allows.
type gcpRule struct {
	field, list string
	allowed     []string
	defaults    []string
	// prefixes: entries ending in "/" allow every value they start.
	prefixes bool
}

// violation returns why r does not allow v, or "".
func (r gcpRule) violation(config, v string) string {
	allowed, why := r.allowed, msgFmtGCPAllows
	if len(allowed) == 0 {
		allowed, why = r.defaults, msgFmtGCPDefault
	}
	for _, a := range allowed {
		if v == a || r.prefixes && strings.HasSuffix(a, "/") && strings.HasPrefix(v, a) {
			return ""
		}
	}
	msg := msgGCPNone
	if len(allowed) > 0 {
		q := make([]string, len(allowed))
		for i, a := range allowed {
			q[i] = strconv.Quote(a)
		}
		msg = strings.Replace(why, "%s", strings.Join(q, ", "), 1)
	}
	return fmt.Sprintf(errFmtGCPPolicy, r.field, v, config, r.list, msg)
}

// Violations returns one message per rule p, a GCPProxy's spec.forProvider,
// breaks, each naming the field and the rule, in the order of the fields.
// It makes no call. An address is checked with its labels, by the backend.
func (g GCP) Violations(p gcpv1alpha1.GCPProxyParameters) []string {
	r := g.Rules
	type value struct {
		r gcpRule
		v string
	}
	vals := []value{
		{gcpRule{field: "spec.forProvider.image", list: "images", allowed: r.Images, defaults: []string{gcpv1alpha1.DefaultImage}, prefixes: true}, orDefault(p.Image, gcpv1alpha1.DefaultImage)},
		{gcpRule{field: "spec.forProvider.machineType", list: "machineTypes", allowed: r.MachineTypes, defaults: GCPDefaultMachineTypes}, orDefault(p.MachineType, gcpv1alpha1.DefaultMachineType)},
		{gcpRule{field: "spec.forProvider.network", list: "networks", allowed: r.Networks, defaults: []string{gcpv1alpha1.DefaultNetwork}}, orDefault(p.Network, gcpv1alpha1.DefaultNetwork)},
	}
	if p.Subnetwork != nil && *p.Subnetwork != "" {
		vals = append(vals, value{gcpRule{field: "spec.forProvider.subnetwork", list: "subnetworks", allowed: r.Subnetworks}, *p.Subnetwork})
	}
	for _, t := range p.NetworkTags {
		vals = append(vals, value{gcpRule{field: "spec.forProvider.networkTags", list: "networkTags", allowed: r.NetworkTags}, t})
	}
	var v []string
	for _, val := range vals {
		if m := val.r.violation(g.Config, val.v); m != "" {
			v = append(v, m)
		}
	}
	if p.ServiceAccountEmail != nil {
		if m := g.ServiceAccountViolation(*p.ServiceAccountEmail); m != "" {
			v = append(v, m)
		}
	}
	return v
}

// ServiceAccountViolation returns why a proxy may not run as service
// account sa, or "". A tenant who names a service account in a GCPProxy
// would otherwise borrow any account the provider may act as.
func (g GCP) ServiceAccountViolation(sa string) string {
	if sa == "" || slices.Contains(g.ServiceAccounts, sa) {
		return ""
	}
	return fmt.Sprintf(errFmtSANotAllowed, sa, g.Config)
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}
