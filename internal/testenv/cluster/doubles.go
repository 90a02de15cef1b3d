/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"os"
)

// A double is how the harness fakes one backend: the step that starts its
// test double and creates its ClusterProviderConfig default. Each backend
// registers its own from its file of this package (registerDouble); the
// harness, the e2e suite and make dev iterate the backends of the provider
// (Backends) and look their doubles up here. A backend without one runs
// without a test double (its claims cannot become Ready in the e2e).
type double struct {
	step func(c *Cluster) step
	// always sets the backend up even when Options.Backends leaves it out.
	always bool
	// optional turns an ErrMissing of the step into an entry of
	// Cluster.Unavailable instead of a failed Start.
	optional bool
	// cannotRun says why the double cannot run on this machine, or "".
	cannotRun func() string
	// adaptInput changes the backend's function input in the
	// Configurations' Compositions for this machine (writeOverlay), as a
	// platform team builds its own Configuration; nil keeps it as shipped.
	adaptInput func(c *Cluster, input map[string]any) error
	// site is where a client can reach the backend's proxies, when the
	// double set up one; nil when it never does.
	site func(c *Cluster) (TrafficSite, bool)
}

var doubles = map[Backend]double{}

// registerDouble registers the test double of backend b. Call it from a
// package-level var of b's own file: var _ = registerDouble(...).
func registerDouble(b Backend, d double) bool {
	doubles[b] = d
	return true
}

// A TrafficSite is where a client sends requests through a backend's
// proxies from: the backend's own network namespace (the libvirt
// sandbox's, the real node's), with the clients' network and room for an
// origin (package traffic's addresses are bound there).
type TrafficSite struct {
	NetNS, ClientCIDR string
	// Resolve resolves the proxy's host:port where the network namespace
	// has no DNS for it (a Service's name); nil when it needs none.
	Resolve func(ctx context.Context, hostport string) (string, error)
}

// TrafficSite returns the site of backend b, or false when no client can
// reach its proxies here.
func (c *Cluster) TrafficSite(b Backend) (TrafficSite, bool) {
	d, ok := doubles[b]
	if !ok || d.site == nil {
		return TrafficSite{}, false
	}
	return d.site(c)
}

func needsRoot() string {
	if os.Geteuid() != 0 {
		return "a private libvirtd needs root"
	}
	return ""
}
