/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package libvirtd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// NetNS returns the path of the sandbox's network namespace, where its
// bridges, dnsmasq and the VMs' networks live. A test that talks to a VM
// opens its sockets there (InNetNS), so no packet leaves the sandbox.
func (d *Daemon) NetNS(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.Base, "holder.pid")) //nolint:gosec // Our own sandbox.
	f := strings.Fields(string(b))
	if err != nil || len(f) == 0 {
		t.Fatalf("cannot read the sandbox's namespace holder: %v", err)
	}
	return filepath.Join("/proc", f[0], "ns", "net")
}

// InNetNS runs fn on an OS thread inside the network namespace at path
// (testenv.InNetNS).
func InNetNS(path string, fn func() error) error { return testenv.InNetNS(path, fn) }
