package libvirtd

import (
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/google/go-cmp/cmp"
)

// These tests run a real libvirtd, so they need root; they skip without it
// (fail when CI=true). Timings are logged with -v.

const (
	leaseTimeout      = 40 * time.Second
	disconnectTimeout = 10 * time.Second
)

func TestTestDriver(t *testing.T) {
	d := Start(t)
	start := time.Now()
	l := d.DialURI(t, "test")
	t.Logf("dial test:///default: %s", time.Since(start))

	doms, _, err := l.ConnectListAllDomains(1, 0)
	if err != nil {
		t.Fatalf("ConnectListAllDomains: %v", err)
	}
	names := make([]string, 0, len(doms))
	for _, dom := range doms {
		names = append(names, dom.Name)
	}
	// The test driver's default instance ships one domain named "test".
	if diff := cmp.Diff([]string{"test"}, names); diff != "" {
		t.Errorf("domains of test:///default: -want, +got:\n%s", diff)
	}
}

func TestQEMUNetbootLease(t *testing.T) {
	before := hostLinks(t)
	d := Start(t)
	p := d.Prepare(t, PrepareOptions{})
	if diff := cmp.Diff(p, d.Prepare(t, PrepareOptions{}), equateNetip()); diff != "" {
		t.Errorf("Prepare is not idempotent: -first, +second:\n%s", diff)
	}
	for _, path := range []string{p.PoolPath, p.BaseVolumePath} {
		if !strings.HasPrefix(path, d.Base+"/") {
			t.Errorf("%s is not under the sandbox %s", path, d.Base)
		}
	}
	l := d.Dial(t)

	const name = "lvd-netboot"
	d.RemoveDomainOnCleanup(t, name)
	x, err := NetbootDomain(name, DefaultNetwork).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	dom, err := l.DomainDefineXML(x)
	if err != nil {
		t.Fatalf("DomainDefineXML: %v", err)
	}
	t.Logf("DomainDefineXML: %s", time.Since(start))
	start = time.Now()
	if err := l.DomainCreate(dom); err != nil {
		t.Fatalf("DomainCreate: %v", err)
	}
	t.Logf("DomainCreate: %s", time.Since(start))

	start = time.Now()
	ip := WaitForLease(t, l, dom, p.Subnet, leaseTimeout)
	t.Logf("lease %s after %s", ip, time.Since(start))
	if ip.Less(p.DHCPStart) || p.DHCPEnd.Less(ip) {
		t.Errorf("lease %s outside the DHCP range %s-%s", ip, p.DHCPStart, p.DHCPEnd)
	}
	// The bridge, tap and dnsmasq exist only in the sandbox's netns.
	if diff := cmp.Diff(before, hostLinks(t)); diff != "" {
		t.Errorf("host network interfaces changed: -before, +after:\n%s", diff)
	}

	start = time.Now()
	if err := RemoveDomain(l, name); err != nil {
		t.Fatal(err)
	}
	t.Logf("destroy+undefine: %s", time.Since(start))
	if _, err := l.DomainLookupByName(name); !hasCode(err, libvirt.ErrNoDomain) {
		t.Errorf("DomainLookupByName after removal: want ErrNoDomain, got %v", err)
	}
}

func TestRestart(t *testing.T) {
	d := Start(t)
	old := d.Dial(t)

	// A running domain must survive the daemon's crash and restart.
	const name = "lvd-survivor"
	d.RemoveDomainOnCleanup(t, name)
	x, err := NetbootDomain(name, "").Marshal()
	if err != nil {
		t.Fatal(err)
	}
	dom, err := old.DomainDefineXML(x)
	if err != nil {
		t.Fatalf("DomainDefineXML: %v", err)
	}
	if err := old.DomainCreate(dom); err != nil {
		t.Fatalf("DomainCreate: %v", err)
	}

	start := time.Now()
	d.Kill(t)
	t.Logf("kill: %s", time.Since(start))
	select {
	case <-old.Disconnected():
		t.Logf("Disconnected() fired %s after the kill began", time.Since(start))
	case <-time.After(disconnectTimeout):
		t.Fatalf("Disconnected() did not fire within %s of the kill", disconnectTimeout)
	}
	if _, err := old.ConnectGetLibVersion(); err == nil {
		t.Error("a call on the dead connection succeeded")
	}
	u, err := url.Parse(d.URI("qemu"))
	if err != nil {
		t.Fatal(err)
	}
	if l, err := libvirt.ConnectToURI(u); err == nil {
		_ = l.Disconnect()
		t.Fatal("dialing a killed daemon succeeded")
	}

	start = time.Now()
	d.Restart(t)
	t.Logf("restart: %s", time.Since(start))
	l := d.Dial(t)
	dom, err = l.DomainLookupByName(name)
	if err != nil {
		t.Fatalf("DomainLookupByName after restart: %v", err)
	}
	state, _, err := l.DomainGetState(dom, 0)
	if err != nil {
		t.Fatalf("DomainGetState after restart: %v", err)
	}
	if diff := cmp.Diff(int32(libvirt.DomainRunning), state); diff != "" {
		t.Errorf("domain state after restart: -want, +got:\n%s", diff)
	}
}

// hostLinks lists this process's network interfaces, which are the host's.
func hostLinks(t *testing.T) []string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(ifs))
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	return names
}

// equateNetip compares netip values, whose fields are unexported.
func equateNetip() cmp.Options {
	return cmp.Options{
		cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
		cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	}
}

// Namespace numbers are recycled as soon as a namespace is freed, so the
// numbers a stopped sandbox recorded may name another sandbox's namespaces
// when tests run in parallel. Stopping the first must not kill the second.
func TestStopSparesAnotherSandboxWithRecycledNamespaces(t *testing.T) {
	live := Start(t)
	ns, err := os.ReadFile(filepath.Join(live.Base, "ns"))
	if err != nil {
		t.Fatal(err)
	}
	// A sandbox whose holder is gone and whose numbers were recycled by live.
	stale := &Daemon{Base: shortTempDir(t), script: live.script, t: t}
	t.Cleanup(func() { _ = os.RemoveAll(stale.Base) })
	if err := os.WriteFile(filepath.Join(stale.Base, "ns"), ns, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := stale.exec("stop", stopTimeout); err != nil {
		t.Fatalf("stop of the stale sandbox: %v\n%s", err, out)
	}
	if out, err := live.exec("status", stopTimeout); err != nil {
		t.Fatalf("the live sandbox after another's stop: %v\n%s", err, out)
	}
	live.DialURI(t, "test")
}
