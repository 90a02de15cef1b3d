/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package traffic sends real requests through a provisioned proxy, for the
// end-to-end suite and make dev: an origin server (HTTP on port 80, HTTPS
// on 443) and a client, both inside a network namespace the test created
// (the libvirt sandbox's, a real node's), so that no packet leaves it.
//
// The origin's "public" addresses are globally routable ones that the
// harness binds inside that namespace: squid's denyPrivateDestinations
// (default true) refuses every private or documentation range, so an
// allowed origin must look public to it. The namespace has no uplink, so a
// packet to such an address is delivered there or nowhere.
package traffic

import (
	"os/exec"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Addresses the harness binds inside the test's namespace (AddAddresses).
const (
	// AllowedOrigin is the origin a claim allows at first.
	AllowedOrigin = "11.11.0.1"
	// OtherOrigin is the origin a claim does not allow at first, and
	// allows instead of AllowedOrigin after an allowlist change.
	OtherOrigin = "11.11.0.2"
	// StableOrigin is an origin a claim allows before and after an
	// allowlist change: no request to it may fail while the change is
	// applied.
	StableOrigin = "11.11.0.3"
	// OutsideClient is a client source address outside every
	// allowedClientCIDRs the harness sets.
	OutsideClient = "172.31.255.1"
)

// Body is what the origin answers on every address and port.
const Body = "served by the origin\n"

const errFmtAddr = "cannot add address %s in the network namespace: %s"

// AddAddresses binds addresses (/32) to the loopback interface of the network
// namespace at netns: the kernel delivers every packet to a local address
// whichever interface it came in on, and answers from it.
func AddAddresses(netns string, addrs ...string) error {
	for _, a := range addrs {
		out, err := exec.Command("nsenter", "--net="+netns, "ip", "addr", "replace", a+"/32", "dev", "lo").CombinedOutput() //nolint:gosec // Test harness.
		if err != nil {
			return errors.Wrapf(err, errFmtAddr, a, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
