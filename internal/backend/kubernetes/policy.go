/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/policy"
)

// AnyNamespace in Policy.Namespaces allows every namespace but the reserved
// ones.
const AnyNamespace = policy.AnyNamespace

// Policy is what a provider config lets the proxies that use it ask of the
// target cluster; package policy holds its rules, which the provider's
// connector applies before any call, and the composition function before
// it composes.
type Policy = policy.Kubernetes

// WithPolicy makes Create and Update refuse a proxy that p does not allow.
// Without it the backend refuses only the reserved namespaces; the factory
// always sets it.
func WithPolicy(p Policy) Option {
	return func(b *Backend) { b.policy = &p }
}

// allow returns a Permanent error naming the field of d that the policy p
// refuses, and the config, or nil. A nil p refuses only the reserved
// namespaces. It makes no call, so a refused proxy never reaches the target
// cluster.
func allow(p *Policy, d backend.Desired[Params]) error {
	if m := p.Violation(d.Params, d.Ownership.Owner.Namespace); m != "" {
		return backend.Permanent(errors.New(m))
	}
	return nil
}
