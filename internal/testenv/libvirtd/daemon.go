// Package libvirtd starts a real, private libvirtd for tests, through
// hack/libvirt-sandbox.sh: a daemon in its own pid, mount and network
// namespaces, reached over a unix socket under a temporary directory. Its
// bridges, dnsmasq and firewall rules never touch the host, and QEMU runs with
// TCG, so tests need root but no KVM.
package libvirtd

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/digitalocean/go-libvirt"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

const (
	// socketRel is where the script puts the read-write socket under BASE.
	socketRel = "run/libvirt-sock"
	// maxSocketPath is the room in sockaddr_un.sun_path, minus the NUL.
	maxSocketPath = 107
	// exitMissing is the script's exit code for "this machine cannot run it".
	exitMissing = 2

	// startTimeout covers a first run that installs packages with apt.
	startTimeout = 10 * time.Minute
	stopTimeout  = 2 * time.Minute

	envCache = "LIBVIRT_SANDBOX_CACHE"
)

// Daemon is a private libvirtd started by Start.
type Daemon struct {
	// Base is the sandbox directory: config in etc/, state in lib/, logs in
	// log/ (libvirtd.log, qemu/NAME.log) and the sockets in run/.
	Base string
	// Socket is the read-write unix socket of the daemon.
	Socket string

	t      testing.TB
	script string

	mu      sync.Mutex
	stopped bool
}

// Start runs a private libvirtd for the test and stops it at cleanup, after
// destroying every domain it runs. It skips the test (fails it when CI=true)
// when the machine cannot run one: not root, no unshare, packages missing and
// not installable. The QEMU capabilities cache is shared between sandboxes
// under the user's cache directory, so only the first DefineXML on a machine
// pays the ~4 s QEMU probe.
func Start(t testing.TB) *Daemon {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "a private libvirtd needs root (namespaces, bridges, iptables)")
	}
	testenv.LookPath(t, "unshare", "util-linux")
	testenv.LookPath(t, "nsenter", "util-linux")
	base := shortTempDir(t)
	d := &Daemon{
		Base:   base,
		Socket: filepath.Join(base, socketRel),
		t:      t,
		script: filepath.Join(testenv.RepoRoot(), "hack", "libvirt-sandbox.sh"),
	}
	t.Cleanup(func() {
		d.Stop()
		if t.Failed() {
			d.logTails(t)
		}
		_ = os.RemoveAll(base)
	})
	d.run(t, "start", startTimeout)
	return d
}

// Stop destroys every domain of the daemon, then stops it and everything
// else in its namespaces. It is idempotent; Start registers it as cleanup.
func (d *Daemon) Stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	d.stopped = true
	if out, err := d.exec("stop", stopTimeout); err != nil {
		d.t.Errorf("cannot stop the private libvirtd in %s: %v\n%s", d.Base, err, out)
	}
}

// Kill kills the daemon with SIGKILL, as a crash would. Its domains and
// networks keep running; Restart brings a daemon back that reattaches to them.
// Existing connections see Disconnected().
func (d *Daemon) Kill(t testing.TB) {
	t.Helper()
	d.run(t, "kill", stopTimeout)
}

// Restart kills the daemon with SIGKILL and starts a new one on the same
// Base, for reconnection tests. Running domains survive it.
func (d *Daemon) Restart(t testing.TB) {
	t.Helper()
	d.Kill(t)
	d.mu.Lock()
	d.stopped = false
	d.mu.Unlock()
	d.run(t, "start", startTimeout)
}

// URI returns the libvirt URI of a driver of the daemon, with the socket, as
// a provider or virsh would take it: "qemu" or "qemu:///system" gives
// qemu+unix:///system?socket=SOCKET, "test" gives test+unix:///default?...,
// and "test:///path/to/fixture.xml" keeps its path.
func (d *Daemon) URI(driver string) string {
	return socketURI(driver, d.Socket)
}

// Dial returns a go-libvirt client connected to qemu:///system on the
// daemon. The test's cleanup closes it.
func (d *Daemon) Dial(t testing.TB) *libvirt.Libvirt {
	t.Helper()
	return d.DialURI(t, "qemu")
}

// DialURI is Dial for any driver URI accepted by URI, e.g. "test".
func (d *Daemon) DialURI(t testing.TB, driver string) *libvirt.Libvirt {
	t.Helper()
	u, err := url.Parse(d.URI(driver))
	if err != nil {
		t.Fatalf("cannot parse the libvirt URI for %q: %v", driver, err)
	}
	l, err := libvirt.ConnectToURI(u)
	if err != nil {
		t.Fatalf("cannot connect to %s: %v", u, err)
	}
	t.Cleanup(func() { _ = l.Disconnect() })
	return l
}

// socketURI turns a driver name or driver URI into a unix-socket URI.
func socketURI(driver, socket string) string {
	u, err := url.Parse(driver)
	if err != nil || u.Scheme == "" {
		u = &url.URL{Scheme: driver, Path: "/system"}
		if driver == "test" {
			u.Path = "/default"
		}
	}
	u.Scheme = strings.SplitN(u.Scheme, "+", 2)[0] + "+unix"
	q := u.Query()
	q.Set("socket", socket)
	u.RawQuery = q.Encode()
	return u.String()
}

// shortTempDir makes a directory whose socket path fits in sun_path, even
// when TMPDIR is long; t.TempDir embeds the test name and often does not.
func shortTempDir(t testing.TB) string {
	t.Helper()
	parent := os.TempDir()
	if len(parent)+len("/lvd-1234567890/")+len(socketRel) > maxSocketPath {
		parent = "/tmp"
	}
	dir, err := os.MkdirTemp(parent, "lvd-")
	if err != nil {
		t.Fatalf("cannot create the sandbox directory: %v", err)
	}
	return dir
}

// run runs the script and skips or fails the test as its exit code says.
func (d *Daemon) run(t testing.TB, cmd string, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	out, err := d.exec(cmd, timeout)
	var exit *exec.ExitError
	switch {
	case err == nil:
		t.Logf("libvirt-sandbox %s: %s", cmd, time.Since(start).Round(time.Millisecond))
	case errors.As(err, &exit) && exit.ExitCode() == exitMissing:
		testenv.Missing(t, "cannot run a private libvirtd: %s", strings.TrimSpace(string(out)))
	default:
		t.Fatalf("hack/libvirt-sandbox.sh %s %s: %v\n%s", cmd, d.Base, err, out)
	}
}

func (d *Daemon) exec(cmd string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, d.script, cmd, d.Base)
	c.Env = os.Environ()
	if dir, err := os.UserCacheDir(); err == nil {
		c.Env = append(c.Env, envCache+"="+filepath.Join(dir, "provider-egressproxy", "libvirt-cache"))
	}
	return c.CombinedOutput()
}

// logTails logs the end of the daemon's and QEMU's logs of a failed test.
func (d *Daemon) logTails(t testing.TB) {
	logs, _ := filepath.Glob(filepath.Join(d.Base, "log", "qemu", "*.log"))
	logs = append([]string{filepath.Join(d.Base, "log", "libvirtd.log")}, logs...)
	for _, p := range logs {
		b, err := os.ReadFile(p) //nolint:gosec // Our own sandbox's logs.
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		t.Logf("--- %s (last %d lines)\n%s", p, len(lines), strings.Join(lines, "\n"))
	}
}
