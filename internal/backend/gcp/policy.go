/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/policy"
)

// DefaultMachineTypes are the machine types a config without
// spec.policy.gcp.machineTypes allows (package policy decides).
var DefaultMachineTypes = policy.GCPDefaultMachineTypes

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

// rules is the policy as package policy, the one implementation of its
// rules, reads it.
func (b *Backend) rules() policy.GCP {
	sas := make([]string, 0, len(b.allowedSAs))
	for sa := range b.allowedSAs {
		sas = append(sas, sa)
	}
	return policy.GCP{Config: b.config, Rules: b.policy, ServiceAccounts: sas}
}

// checkPolicy returns a Permanent error naming the first field of d that
// the provider config does not allow, and the rule (package policy, which
// the provider's connector applies before any call, and the composition
// function before it composes). It makes no call, so a refused proxy
// changes nothing in the project. The address is checked with its labels,
// in ensureAddress.
func (b *Backend) checkPolicy(_ spec, d Desired) error {
	if v := b.rules().Violations(d.Params); len(v) > 0 {
		return backend.Permanent(errors.New(v[0]))
	}
	return nil
}

// addressListed reports whether the policy lets a proxy claim the
// unlabelled address name.
func (b *Backend) addressListed(name string) bool {
	return slices.Contains(b.policy.Addresses, name)
}
