/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"k8s.io/utils/ptr"
	"libvirt.org/go/libvirtxml"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake/guestvm"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/guestimage"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/libvirtd"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/traffic"
)

// The real-guest test runs the startup-script and user-data this backend
// puts into instance metadata, unchanged, as root at boot of the real
// Debian guest (hack/guest-image.sh) on the private libvirtd's QEMU/TCG.
//
// There is no Compute Engine here, so two of its parts are stood in for:
//   - The guest agent, which on GCE fetches startup-script from the metadata
//     server and runs it at every boot: the NoCloud seed carries the
//     backend's user-data as user-data, and a vendor-data script that
//     installs the startup-script with a unit running it at every boot
//     (package guestvm's, which gives the GCE fake's instances real guests
//     in the e2e too).
//   - The metadata server: the fake's MetadataServer for this instance,
//     listening on 169.254.169.254:80 on the libvirt bridge inside the
//     sandbox's network namespace (never the host's), with
//     metadata.google.internal in the guest's /etc/hosts as on GCE images.
//
// The guest's reports go to the fake, and the backend's Observe reads them
// through the real compute client, as it would on GCE. Every socket lives
// in the sandbox's network namespace: the client, the VM, the origin server
// and the metadata server.

const (
	// guestBootBudget is one boot under TCG on a loaded 2-core machine, from
	// DomainCreate to the guest reporting that squid serves: 3m36s with a
	// load average of 10, about a minute less on a quiet machine.
	guestBootBudget = 6 * time.Minute
	metadataAddr    = guestvm.MetadataAddr
	originBody      = "served by the origin\n"
)

func TestRealGuestStartupScript(t *testing.T) {
	image := guestimage.Path(t)
	d := libvirtd.Start(t)
	p := d.Prepare(t, libvirtd.PrepareOptions{})
	ns := d.NetNS(t)
	l := d.Dial(t)
	origin := listenHTTP(t, ns, p.Gateway.String()+":0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, originBody)
	}))
	_, port, _ := net.SplitHostPort(origin)
	originPort, _ := strconv.Atoi(port)

	// The backend, against the fake with the real client and clock.
	fake := gcpfake.NewTestServer(t)
	b, err := New(t.Context(), testProject, fake.ClientOptions(), WithCallTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	des := desired(func(x *Desired) {
		x.Proxy.AllowedClientCIDRs = []string{p.Subnet.String()}
		x.Proxy.AllowedDestinations = []string{p.Gateway.String() + "/32"}
		x.Proxy.AllowedHTTPPorts = []int32{int32(originPort)} //nolint:gosec // A port fits.
		// The origin lives on the bridge's private address.
		x.Proxy.DenyPrivateDestinations = ptr.To(false)
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*guestBootBudget+2*time.Minute)
	defer cancel()
	if err := b.Create(ctx, des); err != nil {
		t.Fatalf("Create: %v", err)
	}
	var o Observation
	for o.State != commonv1alpha1.StateRunning {
		if o, err = b.Observe(ctx, des); err != nil {
			t.Fatalf("Observe: %v", err)
		}
	}
	inst, _ := fake.Instance(testProject, testZone, testName)
	sum := metadataValue(inst, MetadataConfigChecksum)

	// The instance's metadata server, on the bridge inside the sandbox.
	bridge := bridgeOf(t, l, p.Network)
	if out, err := exec.Command("nsenter", "--net="+ns, "ip", "addr", "add", metadataAddr+"/32", "dev", bridge).CombinedOutput(); err != nil { //nolint:gosec // The sandbox's own namespace.
		t.Fatalf("cannot give the bridge %s the metadata server's address: %v\n%s", bridge, err, out)
	}
	listenHTTP(t, ns, metadataAddr+":80", fake.MetadataServer(testProject, testZone, testName))

	// The VM: a copy of the image, the seed, a NIC on the NAT network, the
	// guest agent's channel (for the checks below) and a console log.
	disk := filepath.Join(p.PoolPath, "gce-guest.qcow2")
	copyFile(t, image, disk)
	seed := filepath.Join(p.PoolPath, "gce-seed.iso")
	iso, err := guestvm.Seed(testName, metadataValue(inst, MetadataUserData), guestvm.VendorData(metadataValue(inst, MetadataStartupScript)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seed, iso, 0o644); err != nil { //nolint:gosec // QEMU reads it.
		t.Fatal(err)
	}
	console := filepath.Join(p.PoolPath, "gce-console.log")
	d.RemoveDomainOnCleanup(t, testName)
	x, err := guestvm.Domain(guestvm.Machine{
		Name: testName, Disk: disk, Seed: seed, Console: console,
		Network: p.Network.Name, MemoryMiB: guestimage.RecommendedMemoryMiB,
	}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	dom, err := l.DomainDefineXML(x)
	if err != nil {
		t.Fatalf("DomainDefineXML: %v", err)
	}
	t.Cleanup(func() { logGuestFailure(t, l, dom, console) })

	start := time.Now()
	if err := l.DomainCreate(dom); err != nil {
		t.Fatalf("DomainCreate: %v", err)
	}
	ip := libvirtd.WaitForLease(t, l, dom, p.Subnet, guestBootBudget)
	o = waitGuestReady(ctx, t, b, des, start.Add(guestBootBudget))
	t.Logf("boot to Ready (DomainCreate to Observe Ready from the guest's report): %s", time.Since(start).Round(time.Second))
	if v, _ := fake.GuestAttribute(testProject, testZone, testName, GuestAttributePath); !strings.HasPrefix(v, GuestServing+" "+sum+" ") {
		t.Errorf("guest attribute %s = %q, want serving configuration %s", GuestAttributePath, v, sum)
	}

	// Squid serves our configuration: the Observation's endpoint is the
	// fake's address, so the request goes to the VM's lease.
	endpoint := net.JoinHostPort(ip.String(), "3128")
	allowed := "http://" + origin + "/"
	good := url.UserPassword(des.Credentials.Username, des.Credentials.Password)
	for name, tc := range map[string]struct {
		user   *url.Userinfo
		target string
		want   int
	}{
		"AllowedHost":    {user: good, target: allowed, want: http.StatusOK},
		"HostNotAllowed": {user: good, target: "http://192.0.2.10:" + port + "/", want: http.StatusForbidden},
		"NoCredentials":  {target: allowed, want: http.StatusProxyAuthRequired},
	} {
		if code, _, err := proxyGet(ctx, ns, endpoint, tc.user, tc.target); err != nil || code != tc.want {
			t.Errorf("%s: GET %s through %s: want %d, got %d, %v", name, tc.target, endpoint, tc.want, code, err)
		}
	}
	// The guard keeps squid's user from the metadata server (the kernel
	// refuses the connection); root, as the reporter, reaches it.
	const dial = "bash -c 'exec 3<>/dev/tcp/" + metadataAddr + "/80' && echo reached"
	if out, err := guestRun(ctx, l, dom, "setpriv --reuid=proxy --regid=proxy --clear-groups "+dial); err == nil || !strings.Contains(out, "Connection refused") {
		t.Errorf("squid's user must be refused by the metadata guard: %v\n%s", err, out)
	}
	if out, err := guestRun(ctx, l, dom, dial); err != nil || !strings.Contains(out, "reached") {
		t.Errorf("root must reach the metadata server: %v\n%s", err, out)
	}

	// A second boot of the same VM changes nothing: no file rewritten, no
	// package installed, and squid serves again.
	const fingerprint = "stat -c '%n %Y' /etc/squid/squid.conf /etc/squid/egressproxy/htpasswd " + reporterPath + " " +
		metadataGuardPath + " " + metadataGuardDropIn + " " + reporterTimerPath + "; wc -l </var/log/dpkg.log; systemctl is-enabled egressproxy-report.timer"
	before, err := guestRun(ctx, l, dom, fingerprint)
	if err != nil {
		t.Fatalf("%v\n%s", err, before)
	}
	rebootGuest(ctx, t, l, dom, fake)
	reboot := time.Now()
	o = waitGuestReady(ctx, t, b, des, reboot.Add(guestBootBudget))
	t.Logf("second boot to Ready: %s", time.Since(reboot).Round(time.Second))
	after, err := guestRun(ctx, l, dom, fingerprint)
	if err != nil || after != before {
		t.Errorf("the second boot changed the guest (%v):\nbefore:\n%s\nafter:\n%s", err, before, after)
	}
	if code, body, err := proxyGet(ctx, ns, endpoint, good, allowed); err != nil || code != http.StatusOK || body != originBody {
		t.Errorf("after the second boot: GET %s: %d %q, %v", allowed, code, body, err)
	}

	// A VM that loses squid goes back to not Ready, with the guest's reason.
	if out, err := guestRun(ctx, l, dom, "systemctl stop squid && "+reporterPath+"; true"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if o, err = b.Observe(ctx, des); err != nil || o.Ready || !strings.HasSuffix(o.Message, "squid does not serve: squid is not running") {
		t.Errorf("Observe after squid stopped: want not Ready, saying squid is not running; got %t %q, %v", o.Ready, o.Message, err)
	}
}

// waitGuestReady polls Observe until it is Ready, or fails at deadline.
func waitGuestReady(ctx context.Context, t *testing.T, b *Backend, d Desired, deadline time.Time) Observation {
	t.Helper()
	var o Observation
	var err error
	for time.Now().Before(deadline) {
		if o, err = b.Observe(ctx, d); err == nil && o.Ready {
			return o
		}
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("not Ready by the deadline: %+v, %v", o, err)
	return o
}

// rebootGuest shuts the VM down cleanly, forgets its report, and starts it
// again, so only the second boot can report.
func rebootGuest(ctx context.Context, t *testing.T, l *golibvirt.Libvirt, dom golibvirt.Domain, fake *gcpfake.Server) {
	t.Helper()
	if err := l.DomainShutdown(dom); err != nil {
		t.Fatalf("DomainShutdown: %v", err)
	}
	for {
		st, _, err := l.DomainGetState(dom, 0)
		if err == nil && golibvirt.DomainState(st) == golibvirt.DomainShutoff {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the guest did not shut down: %v", err)
		}
		time.Sleep(time.Second)
	}
	if err := fake.DeleteGuestAttribute(testProject, testZone, testName, GuestAttributePath); err != nil {
		t.Fatal(err)
	}
	if err := l.DomainCreate(dom); err != nil {
		t.Fatalf("DomainCreate: %v", err)
	}
}

// copyFile copies the cached image: nothing the VM does may change it.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src) //nolint:gosec // The cached image.
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()           //nolint:errcheck // Read-only.
	out, err := os.Create(dst) //nolint:gosec // The sandbox's pool.
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// bridgeOf returns the bridge device of a libvirt network.
func bridgeOf(t *testing.T, l *golibvirt.Libvirt, n golibvirt.Network) string {
	t.Helper()
	desc, err := l.NetworkGetXMLDesc(n, 0)
	if err != nil {
		t.Fatal(err)
	}
	var x libvirtxml.Network
	if err := x.Unmarshal(desc); err != nil || x.Bridge == nil || x.Bridge.Name == "" {
		t.Fatalf("network %s has no bridge: %v", n.Name, err)
	}
	return x.Bridge.Name
}

// listenHTTP serves h on addr inside the network namespace ns, and returns
// the address it listens on.
func listenHTTP(t *testing.T, ns, addr string, h http.Handler) string {
	t.Helper()
	var ln net.Listener
	if err := libvirtd.InNetNS(ns, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatalf("cannot listen on %s in the sandbox: %v", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// proxyGet sends GET target through the proxy at endpoint, as user (none
// when nil), from inside the network namespace ns.
func proxyGet(ctx context.Context, ns, endpoint string, user *url.Userinfo, target string) (int, string, error) {
	r, err := traffic.Client{NetNS: ns, Proxy: &url.URL{Scheme: "http", Host: endpoint, User: user}}.Get(ctx, target)
	return r.Code, r.Body, err
}

// guestRun runs a shell command in the guest through the QEMU guest agent
// and returns its output; a non-zero exit is an error.
func guestRun(ctx context.Context, l *golibvirt.Libvirt, dom golibvirt.Domain, script string) (string, error) {
	agent := func(cmd string, args any) (json.RawMessage, error) {
		req, _ := json.Marshal(map[string]any{"execute": cmd, "arguments": args})
		for {
			out, err := l.QEMUDomainAgentCommand(dom, string(req), 10, 0)
			if err == nil && len(out) > 0 {
				var r struct {
					Return json.RawMessage `json:"return"`
				}
				err = json.Unmarshal([]byte(out[0]), &r)
				return r.Return, err
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("guest agent: %w (%w)", err, ctx.Err())
			}
			time.Sleep(time.Second) // the agent is not up yet
		}
	}
	r, err := agent("guest-exec", map[string]any{"path": "/bin/sh", "arg": []string{"-c", "exec 2>&1; " + script}, "capture-output": true})
	if err != nil {
		return "", err
	}
	var pid struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(r, &pid); err != nil {
		return "", err
	}
	for ctx.Err() == nil {
		r, err := agent("guest-exec-status", map[string]any{"pid": pid.PID})
		if err != nil {
			return "", err
		}
		var st struct {
			Exited   bool   `json:"exited"`
			ExitCode int    `json:"exitcode"`
			OutData  string `json:"out-data"`
		}
		if err := json.Unmarshal(r, &st); err != nil {
			return "", err
		}
		if st.Exited {
			out, _ := base64.StdEncoding.DecodeString(st.OutData)
			if st.ExitCode != 0 {
				return string(out), fmt.Errorf("%q exited with %d", script, st.ExitCode)
			}
			return string(out), nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return "", ctx.Err()
}

// logGuestFailure logs the console and what the startup-script and
// cloud-init said, when the test failed.
func logGuestFailure(t *testing.T, l *golibvirt.Libvirt, dom golibvirt.Domain, console string) {
	if !t.Failed() {
		return
	}
	if b, err := os.ReadFile(console); err == nil { //nolint:gosec // The test's own log.
		if len(b) > 8000 {
			b = b[len(b)-8000:]
		}
		t.Logf("--- console (tail):\n%s", b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := guestRun(ctx, l, dom, "cloud-init status --long; journalctl -b --no-pager -u gce-startup-script -u egressproxy-report -u squid | tail -40")
	t.Logf("--- the guest, through its agent (%v):\n%s", err, out)
}
