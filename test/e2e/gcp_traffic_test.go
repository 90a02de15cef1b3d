/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"time"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

// The gcp backend's traffic: where a private libvirtd runs, the GCE fake
// gives every RUNNING instance a real guest (package guestvm: the guest
// image, booted with the instance's user-data and startup-script, in the
// fake's own libvirt sandbox), so the GCPProxy is Ready only once that
// guest reports that squid serves, and the claim's proxy URL (the
// instance's external IP, a DNAT to the guest as GCE's 1:1 NAT) takes real
// requests from a client in the sandbox's network namespace. The shared
// "serves traffic" specs (traffic_test.go) send them; a change of the
// allowlist or of the password replaces the instance, so each boots a new
// guest.

// gcpReadyTimeout bounds one instance's way to Ready: the GCE fake's
// operations, then one guest boot under TCG until its startup-script
// reports that squid serves (1.5 to 4 minutes on a busy machine).
const gcpReadyTimeout = 8 * time.Minute

var gcpTraffic = &trafficCase{
	unavailable: func() string {
		switch {
		case env.c.GCE == nil:
			return "no GCE fake runs here"
		case env.c.GCE.Guests == nil:
			return "the GCE fake simulates its guests: " + env.c.GCE.NoGuests
		}
		return ""
	},
	netns: func() string { return env.c.GCE.Guests.NetNS },
	// The client reaches the external IP through the sandbox's bridge, so
	// squid sees the bridge's address.
	clientCIDR:    func() string { return env.c.GCE.Guests.Prepared.Subnet.String() },
	privateOrigin: func() string { return env.c.GCE.Guests.Prepared.Gateway.String() },
	composition:   applyTrafficGCPComposition,
	readyTimeout:  gcpReadyTimeout,
}

// applyTrafficGCPComposition applies the shipped gcp Composition without
// guardrails (applyComposition).
func applyTrafficGCPComposition(ctx context.Context) map[string]string {
	return applyComposition(ctx, cluster.BackendGCP, "gcp-traffic", nil)
}
