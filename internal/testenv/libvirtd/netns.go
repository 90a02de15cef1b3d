package libvirtd

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"golang.org/x/sys/unix"
)

const (
	errOpenNetNS = "cannot open the network namespace"
	errSetNetNS  = "cannot enter the network namespace"
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

// InNetNS runs fn on an OS thread that has entered the network namespace at
// path. Sockets fn opens (listeners, connections) stay in that namespace
// for their whole life, whichever goroutine uses them later; goroutines fn
// starts run outside it.
func InNetNS(path string, fn func() error) error {
	target, err := os.Open(path) //nolint:gosec // A namespace the caller names.
	if err != nil {
		return errors.Wrap(err, errOpenNetNS)
	}
	defer target.Close() //nolint:errcheck // Read-only.
	runtime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return errors.Wrap(err, errOpenNetNS)
	}
	defer self.Close() //nolint:errcheck // Read-only.
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return errors.Wrap(err, errSetNetNS)
	}
	// A thread that cannot go back stays locked: Go then ends it with the
	// goroutine instead of reusing it in the wrong namespace.
	defer func() {
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return fn()
}
