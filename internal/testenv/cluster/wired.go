/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"slices"

	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
)

// A Backend runs egress proxies; it is also the value of the Composition
// label egressproxy.io/backend.
type Backend string

// Backends returns every backend of the provider, in the order of
// registry.Backends.
func Backends() []Backend {
	out := make([]Backend, 0, len(registry.Backends))
	for _, n := range registry.Backends.Names() {
		out = append(out, Backend(n))
	}
	return out
}

// WiredBackends returns the backends that cmd/provider builds in: every
// backend of registry.Backends, since registering a backend is wiring it (a
// test of cmd/provider keeps its list and registry.Backends the same).
func WiredBackends() (map[Backend]bool, error) {
	wired := map[Backend]bool{}
	for _, b := range Backends() {
		wired[b] = true
	}
	return wired, nil
}

// CannotRun says why the test double of b cannot run on this machine, or "".
func CannotRun(b Backend) string {
	if d, ok := doubles[b]; ok && d.cannotRun != nil {
		return d.cannotRun()
	}
	return ""
}

// backendSteps returns the steps that set up the test doubles and ProviderConfigs
// of the backends: those always set up, and those opts asks for.
func (c *Cluster) backendSteps() []step {
	var steps []step
	for _, b := range Backends() {
		d, ok := doubles[b]
		if !ok || (!d.always && !slices.Contains(c.opts.Backends, b)) {
			continue
		}
		s := d.step(c)
		if d.optional {
			s.fn = c.optional(b, s.fn)
		}
		steps = append(steps, s)
	}
	return steps
}
