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
	return d.namespace(t, "net")
}

// MountNS returns the path of the sandbox's mount namespace: the host's
// file systems, with a private /run and the libvirt directories of the
// sandbox mounted over the host's. A server that must look like it runs
// on the libvirt host (sshd, which needs /run/sshd) runs there too.
func (d *Daemon) MountNS(t testing.TB) string {
	t.Helper()
	return d.namespace(t, "mnt")
}

// namespace returns the path of a namespace (ns/<kind>) of the sandbox's
// holder, PID 1 of its namespaces.
func (d *Daemon) namespace(t testing.TB, kind string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.Base, "holder.pid")) //nolint:gosec // Our own sandbox.
	f := strings.Fields(string(b))
	if err != nil || len(f) == 0 {
		t.Fatalf("cannot read the sandbox's namespace holder: %v", err)
	}
	return filepath.Join("/proc", f[0], "ns", kind)
}

// InNetNS runs fn on an OS thread inside the network namespace at path
// (testenv.InNetNS).
func InNetNS(path string, fn func() error) error { return testenv.InNetNS(path, fn) }
