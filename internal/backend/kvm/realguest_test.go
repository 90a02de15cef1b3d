/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/dialer"
	"github.com/egressproxy/provider-egressproxy/internal/cloudinit"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/guestimage"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/libvirtd"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/traffic"
)

// The real-guest suite boots the image hack/guest-image.sh builds (Debian,
// cloud-init, squid) on the private libvirtd's QEMU/TCG: the real cloud-init
// applies the backend's own seed, and real requests go through squid in the
// VM. Every socket lives in the sandbox's network namespace: the client, the
// VM on the NAT network, and the origin server on the bridge's address.

const (
	// realGuestBudget is one boot under TCG on a loaded 2-core machine,
	// from DomainCreate to squid serving our configuration (about 35 s idle).
	realGuestBudget = 6 * time.Minute
	realGuestBase   = "guest.qcow2"
	realGuestDisk   = 3 // GiB: larger than the image, so cloud-init grows the root
	originBody      = "served by the origin\n"
)

func TestRealGuestServesTraffic(t *testing.T) {
	image := guestimage.Path(t)
	d := libvirtd.Start(t)
	p := d.Prepare(t, libvirtd.PrepareOptions{})
	ns := d.NetNS(t)
	installBaseImage(t, d, p, image)
	origin := startOrigin(t, ns, p.Gateway.String())
	_, port, _ := net.SplitHostPort(origin)
	originPort, _ := strconv.Atoi(port)

	des := desired(withPool(libvirtd.DefaultPool), func(x *Desired) {
		x.Params.BaseImageVolume = realGuestBase
		x.Params.DiskGiB = realGuestDisk
		x.Params.MemoryMiB = guestimage.RecommendedMemoryMiB
		// Two TCG threads get the guest a fairer share of a busy host.
		x.Params.VCPUs = 2
		x.Proxy.AllowedClientCIDRs = []string{p.Subnet.String()}
		x.Proxy.AllowedDestinations = []string{p.Gateway.String() + "/32"}
		x.Proxy.AllowedHTTPPorts = []int32{int32(originPort)} //nolint:gosec // A port fits.
		// The origin lives on the bridge's private address.
		x.Proxy.DenyPrivateDestinations = ptr.To(false)
	})
	d.RemoveDomainOnCleanup(t, des.Name)
	b, err := New(dialer.Target{URI: d.URI("qemu")}, WithServeProbe())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	t.Cleanup(func() { logGuest(t, b, des.Name) })
	ctx, cancel := context.WithTimeout(context.Background(), realGuestBudget+5*time.Minute)
	defer cancel()

	start := time.Now()
	if err := b.Create(ctx, des); err != nil {
		t.Fatalf("Create: %v", err)
	}
	// Ready means squid in the guest serves our configuration: the guest
	// agent's probe, not the lease.
	o := waitObserved(ctx, t, b, des, true, start.Add(realGuestBudget))
	t.Logf("boot to Ready (DomainCreate to Observe Ready at %s): %s", o.Endpoint, time.Since(start).Round(time.Second))

	allowed := "http://" + origin + "/"
	good := url.UserPassword(des.Credentials.Username, des.Credentials.Password)
	// Ready already saw squid answer with our squid.conf in the guest.
	served := time.Now().Add(30 * time.Second)
	for {
		code, body, err := proxyGet(ctx, ns, o.Endpoint, good, allowed)
		if err == nil && code == http.StatusOK && body == originBody {
			break
		}
		if time.Now().After(served) {
			t.Fatalf("Ready, but squid does not serve: last answer %d %q, %v", code, body, err)
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("boot to serving (DomainCreate to the first proxied 200): %s", time.Since(start).Round(time.Second))
	// It serves behind the NIC filter, the address learnt from its lease.
	checkFilterBinding(t, d.Dial(t), MACAddress(des.Ownership.Owner.UID))

	cases := map[string]struct {
		reason string
		user   *url.Userinfo
		target string
		want   int
	}{
		"AllowedHost": {
			reason: "An allowed destination is proxied to the origin.",
			user:   good,
			target: allowed,
			want:   http.StatusOK,
		},
		"HostNotAllowed": {
			reason: "A destination outside the allowlist is refused (squid never connects to it).",
			user:   good,
			target: "http://192.0.2.10:" + port + "/",
			want:   http.StatusForbidden,
		},
		"NoCredentials": {
			reason: "A client without credentials is asked for them.",
			target: allowed,
			want:   http.StatusProxyAuthRequired,
		},
		"WrongPassword": {
			reason: "A wrong password is refused like none.",
			user:   url.UserPassword(des.Credentials.Username, "wrong-password"),
			target: allowed,
			want:   http.StatusProxyAuthRequired,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, _, err := proxyGet(ctx, ns, o.Endpoint, tc.user, tc.target)
			if err != nil || code != tc.want {
				t.Errorf("%s\nGET %s through %s: want %d, got %d, %v", tc.reason, tc.target, o.Endpoint, tc.want, code, err)
			}
		})
	}

	// A VM that loses squid goes back to not Ready, and says why.
	guestRun(ctx, t, b, des.Name, "systemctl stop squid")
	o = waitObserved(ctx, t, b, des, false, time.Now().Add(time.Minute))
	if want := fmt.Sprintf(msgFmtWaitServe, strings.Split(o.Endpoint, ":")[0], "squid is not running"); o.Message != want {
		t.Errorf("Observe with squid stopped: want message %q, got %q", want, o.Message)
	}
	guestRun(ctx, t, b, des.Name, "systemctl start squid")
	waitObserved(ctx, t, b, des, true, time.Now().Add(time.Minute))

	rotated := liveChanges(ctx, t, b, des, ns, o.Endpoint, allowed)
	countsExactly(ctx, t, b, rotated, ns, o.Endpoint, allowed)
}

// liveChanges applies an allowlist change and a password rotation to the
// running guest while a client sends requests through the proxy: every
// answer is the old rule's or the new one's, never a refused connection or
// a 5xx, and the VM (its UUID, its boot) stays the same.
func liveChanges(ctx context.Context, t *testing.T, b *Backend, des Desired, ns, endpoint, allowed string) Desired {
	t.Helper()
	dom, err := b.svc.DomainLookupByName(ctx, des.Name)
	if err != nil {
		t.Fatal(err)
	}
	uuid := dom.UUID
	bootID := func() string {
		out, err := runInGuest(ctx, b, des.Name, "cat /proc/sys/kernel/random/boot_id")
		if err != nil {
			t.Fatalf("boot_id: %v", err)
		}
		return strings.TrimSpace(out)
	}
	boot := bootID()
	good := url.UserPassword(des.Credentials.Username, des.Credentials.Password)

	closed := des
	closed.Proxy.AllowedDestinations = []string{"192.0.2.10/32"}
	rotated := des
	rotated.Credentials.Password = "a-rotated-password"
	fresh := url.UserPassword(des.Credentials.Username, rotated.Credentials.Password)
	steps := []struct {
		name   string
		d      Desired
		user   *url.Userinfo
		before []int
		after  int
	}{
		// The origin leaves the allowlist: 200 until the change, then 403.
		{"Allowlist", closed, good, []int{http.StatusOK}, http.StatusForbidden},
		// Back, with new credentials, which squid refused until then (407,
		// or 403 where it checks the destination first).
		{"Rotation", rotated, fresh, []int{http.StatusProxyAuthRequired, http.StatusForbidden}, http.StatusOK},
	}
	for _, s := range steps {
		// A client sends a request every 100 ms while Update runs.
		stop := make(chan struct{})
		answers := make(chan string, 1)
		go func() {
			var bad []string
			for {
				select {
				case <-stop:
					answers <- strings.Join(bad, "; ")
					return
				case <-time.After(100 * time.Millisecond):
				}
				code, _, err := proxyGet(ctx, ns, endpoint, s.user, allowed)
				if err != nil || (!slices.Contains(s.before, code) && code != s.after) {
					bad = append(bad, fmt.Sprintf("%d %v", code, err))
				}
			}
		}()
		start := time.Now()
		err := b.Update(ctx, s.d)
		applied := time.Since(start)
		close(stop)
		if bad := <-answers; bad != "" {
			t.Errorf("%s: answers neither the old rule's (%v) nor the new one's (%d) during the change: %s", s.name, s.before, s.after, bad)
		}
		if err != nil {
			t.Fatalf("%s: Update: %v", s.name, err)
		}
		code, _, err := proxyGet(ctx, ns, endpoint, s.user, allowed)
		t.Logf("%s: Update to the new rule enforced: %s", s.name, applied.Round(time.Millisecond))
		if err != nil || code != s.after {
			t.Errorf("%s: after Update: want %d, got %d, %v", s.name, s.after, code, err)
		}
		o, err := b.Observe(ctx, s.d)
		if err != nil || !o.Ready || !o.UpToDate {
			t.Errorf("%s: Observe after Update: want Ready and up to date, got %+v, %v", s.name, o, err)
		}
	}
	if code, _, err := proxyGet(ctx, ns, endpoint, good, allowed); err != nil || code != http.StatusProxyAuthRequired {
		t.Errorf("the old password after the rotation: want 407, got %d, %v", code, err)
	}
	after, err := b.svc.DomainLookupByName(ctx, des.Name)
	if err != nil || after.UUID != uuid {
		t.Errorf("the domain was replaced: UUID %x, then %x (%v)", uuid, after.UUID, err)
	}
	if got := bootID(); got != boot {
		t.Errorf("the guest rebooted: boot ID %s, then %s", boot, got)
	}
	// The counter writes its file once per second of log: a later request
	// flushes the earlier ones.
	var o Observation
	for range 30 {
		_, _, _ = proxyGet(ctx, ns, endpoint, fresh, allowed)
		o, err = b.Observe(ctx, rotated)
		if err == nil && o.Traffic != nil && o.Traffic.Allowed > 0 && o.Traffic.DeniedDestination > 0 && o.Traffic.DeniedAuth > 0 {
			break
		}
		time.Sleep(time.Second)
	}
	if o.Traffic == nil || o.Traffic.Allowed == 0 || o.Traffic.DeniedDestination == 0 || o.Traffic.DeniedAuth == 0 {
		t.Errorf("Observe: want traffic with allowed, denied destination and denied auth requests, got %+v, %v", o.Traffic, err)
	}
	t.Logf("traffic: %v", o.Traffic)
	return rotated
}

// countsExactly sends known requests and reads exactly their counts back,
// then again after the journal rotates its files and after the counter is
// restarted and killed: the journal is the counter's source, and neither a
// rotation nor a restart may count a line twice or lose one.
func countsExactly(ctx context.Context, t *testing.T, b *Backend, d Desired, ns, endpoint, allowed string) {
	t.Helper()
	user := url.UserPassword(d.Credentials.Username, d.Credentials.Password)
	requests := func(x squid.Traffic) squid.Traffic {
		return squid.Traffic{Allowed: x.Allowed, DeniedDestination: x.DeniedDestination, DeniedClient: x.DeniedClient, DeniedAuth: x.DeniedAuth}
	}
	// settled reads the counts until two reads 3 s apart agree: each
	// Observe's probe is a later log line, which flushes the counter.
	settled := func(what string) squid.Traffic {
		t.Helper()
		var last *squid.Traffic
		for range 40 {
			o, err := b.Observe(ctx, d)
			if err == nil && o.Traffic != nil {
				now := requests(*o.Traffic)
				if last != nil && *last == now {
					return now
				}
				last = &now
			}
			time.Sleep(3 * time.Second)
		}
		t.Fatalf("%s: the traffic counts did not settle: %+v", what, last)
		return squid.Traffic{}
	}
	send := func(n int, target string, want int) {
		t.Helper()
		for range n {
			if code, _, err := proxyGet(ctx, ns, endpoint, user, target); err != nil || code != want {
				t.Fatalf("GET %s: want %d, got %d, %v", target, want, code, err)
			}
		}
	}
	want := settled("before")
	send(3, allowed, http.StatusOK)
	send(2, "http://192.0.2.10:1/", http.StatusForbidden)
	want.Allowed += 3
	want.DeniedDestination += 2
	if got := settled("after 5 requests"); got != want {
		t.Errorf("after 3 allowed and 2 refused requests: want %+v, got %+v", want, got)
	}
	for _, step := range []struct{ name, script string }{
		{"a journal rotation", "journalctl --rotate"},
		{"a restart of the counter", "systemctl restart " + cloudinit.TrafficUnit},
		{"the counter killed", "systemctl kill -s KILL " + cloudinit.TrafficUnit + "; sleep 4"},
	} {
		guestRun(ctx, t, b, d.Name, step.script)
		send(1, allowed, http.StatusOK)
		want.Allowed++
		if got := settled("after " + step.name); got != want {
			out, _ := runInGuest(ctx, b, d.Name, "systemctl show -p NRestarts "+cloudinit.TrafficUnit+"; cat "+cloudinit.TrafficPath+"; journalctl -o short-unix --no-pager SYSLOG_FACILITY=20 | grep -v 127.0.0.1:1/ | tail -n 30; ls -la /run/log/journal/* /var/log/journal/*")
			t.Errorf("after %s and 1 allowed request: want %+v, got %+v\n%s", step.name, want, got, out)
		}
	}
	t.Logf("counts after 5 known requests, a journal rotation, a restart and a kill of the counter, each with 1 more request: %v", want)
}

// guestRun runs a shell command in the guest through the guest agent, and
// fails the test unless it succeeds.
func guestRun(ctx context.Context, t *testing.T, b *Backend, name, script string) {
	t.Helper()
	if out, err := runInGuest(ctx, b, name, script); err != nil {
		t.Fatalf("%q in the guest: %v\n%s", script, err, out)
	}
}

// runInGuest runs a shell command in the guest and returns its output.
func runInGuest(ctx context.Context, b *Backend, name, script string) (string, error) {
	dom, err := b.svc.DomainLookupByName(ctx, name)
	if err != nil {
		return "", err
	}
	a := b.svc.(agentCommander) //nolint:forcetypeassert // rpc has it.
	r, err := agentCall(ctx, a, dom, agentRequest{Execute: "guest-exec", Arguments: guestExec{
		Path: "/bin/sh", Arg: []string{"-c", script + " 2>&1"}, CaptureOutput: true,
	}})
	if err != nil || r.Why != "" {
		return "", errors.Errorf("guest-exec: %v %s", err, r.Why)
	}
	for range 60 {
		st, err := agentCall(ctx, a, dom, agentRequest{Execute: "guest-exec-status", Arguments: guestExecStatus{PID: r.PID}})
		if err != nil || st.Why != "" {
			return "", errors.Errorf("guest-exec-status: %v %s", err, st.Why)
		}
		if st.Exited {
			out, _ := base64.StdEncoding.DecodeString(st.OutData)
			if st.ExitCode != 0 {
				return string(out), errors.Errorf("exit code %d", st.ExitCode)
			}
			return string(out), nil
		}
		time.Sleep(time.Second)
	}
	return "", errors.New("did not finish within a minute")
}

// logGuest logs what cloud-init and squid say in the guest of a failed test,
// when the guest agent answers.
func logGuest(t *testing.T, b *Backend, name string) {
	if !t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := runInGuest(ctx, b, name, "cloud-init status --long; systemctl status --no-pager squid | tail -20; tail -20 /var/log/cloud-init-output.log")
	t.Logf("--- the guest, through its agent (%v):\n%s", err, out)
}

// waitObserved polls Observe until the running instance's Ready is ready,
// or fails the test at deadline.
func waitObserved(ctx context.Context, t *testing.T, b *Backend, d Desired, ready bool, deadline time.Time) Observation {
	t.Helper()
	var o Observation
	var err error
	for time.Now().Before(deadline) {
		if o, err = b.Observe(ctx, d); err == nil && o.Ready == ready && o.State == commonv1alpha1.StateRunning {
			return o
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("Ready is not %t by the deadline: %+v, %v", ready, o, err)
	return o
}

// installBaseImage copies the guest image into the pool as a volume. A copy,
// not a link: nothing the VMs do may change the cached image.
func installBaseImage(t *testing.T, d *libvirtd.Daemon, p libvirtd.Prepared, image string) {
	t.Helper()
	src, err := os.Open(image) //nolint:gosec // The cached image.
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close() //nolint:errcheck // Read-only.
	dst, err := os.Create(filepath.Join(p.PoolPath, realGuestBase))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Dial(t).StoragePoolRefresh(p.Pool, 0); err != nil {
		t.Fatalf("cannot refresh the pool: %v", err)
	}
}

// startOrigin serves originBody on addr (port 0: any) inside the network
// namespace ns, and returns its host:port.
func startOrigin(t *testing.T, ns, addr string) string {
	t.Helper()
	var l net.Listener
	if err := libvirtd.InNetNS(ns, func() (err error) {
		l, err = net.Listen("tcp", net.JoinHostPort(addr, "0"))
		return err
	}); err != nil {
		t.Fatalf("cannot listen in the sandbox: %v", err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, originBody)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// proxyGet sends GET target through the proxy at endpoint, as user (none
// when nil), from inside the network namespace ns.
func proxyGet(ctx context.Context, ns, endpoint string, user *url.Userinfo, target string) (int, string, error) {
	r, err := traffic.Client{NetNS: ns, Proxy: &url.URL{Scheme: "http", Host: endpoint, User: user}}.Get(ctx, target)
	return r.Code, r.Body, err
}
