/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

func TestGuestReady(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	const sum, ip = "0123456789abcdef0123", "203.0.113.9"
	wait := func(why string) string { return fmt.Sprintf(msgFmtWaitGuest, ip, why) }
	cases := map[string]struct {
		reason    string
		report    string
		wantReady bool
		wantMsg   string
	}{
		"NoReport": {
			reason:  "A guest that has not reported is waited for.",
			wantMsg: wait(msgGuestNoReport),
		},
		"Serving": {
			reason:    "A fresh report that squid serves the wanted configuration is Ready.",
			report:    GuestReport(GuestServing, sum, now.Add(-40*time.Second), ""),
			wantReady: true,
			wantMsg:   msgServing,
		},
		"ServingOtherConfig": {
			reason:    "Squid serving another configuration (the spec changed, the guest applies it live) stays Ready.",
			report:    GuestReport(GuestServing, "fedcba9876543210fedc", now, ""),
			wantReady: true,
			wantMsg:   fmt.Sprintf(msgFmtApplying, "fedcba9876543210fedc", sum),
		},
		"Starting": {
			reason:  "A guest whose startup-script runs is waited for.",
			report:  GuestReport(GuestStarting, sum, now, ""),
			wantMsg: wait(msgGuestStarting),
		},
		"Failed": {
			reason:  "A guest-reported failure shows its reason.",
			report:  GuestReport(GuestFailed, sum, now, "squid is not running; cloud-init reports an error"),
			wantMsg: fmt.Sprintf(msgFmtGuestFailed, ip, "squid is not running; cloud-init reports an error"),
		},
		"FailedLongReason": {
			reason:  "A long reason is cut, so a guest cannot flood the status.",
			report:  GuestReport(GuestFailed, sum, now, strings.Repeat("x", 2*maxReport)),
			wantMsg: fmt.Sprintf(msgFmtGuestFailed, ip, strings.Repeat("x", maxReport)),
		},
		"Stale": {
			reason:  "A guest that stopped reporting is not Ready, whatever it said last.",
			report:  GuestReport(GuestServing, sum, now.Add(-guestReportMaxAge-time.Second), ""),
			wantMsg: wait(fmt.Sprintf(msgFmtGuestStale, "2027-01-15T07:56:59Z")),
		},
		"FromTheFuture": {
			reason:  "A report far ahead of the provider's clock is not trusted either.",
			report:  GuestReport(GuestServing, sum, now.Add(guestReportMaxAge+time.Second), ""),
			wantMsg: wait(fmt.Sprintf(msgFmtGuestStale, "2027-01-15T08:03:01Z")),
		},
		"Garbage": {
			reason:  "An unreadable report is not Ready.",
			report:  "yes",
			wantMsg: wait(fmt.Sprintf(msgFmtGuestUnknown, "yes")),
		},
		"UnknownState": {
			reason:  "An unknown state is not Ready.",
			report:  GuestReport("dancing", sum, now, ""),
			wantMsg: wait(fmt.Sprintf(msgFmtGuestUnknown, GuestReport("dancing", sum, now, ""))),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := guestReady(tc.report, sum, ip, now)
			if g.ready != tc.wantReady || g.msg != tc.wantMsg {
				t.Errorf("%s\nguestReady(%q): want %t %q, got %t %q", tc.reason, tc.report, tc.wantReady, tc.wantMsg, g.ready, g.msg)
			}
		})
	}
}

// TestObserveWaitsForTheGuest drives one proxy through what its guest
// reports, against the fake and the real client.
func TestObserveWaitsForTheGuest(t *testing.T) {
	e := newEnv(t)
	d := desired()
	if err := e.b.Create(ctx(t), d); err != nil {
		t.Fatalf("Create: %v", err)
	}
	var o Observation
	for range 5 {
		o, _ = e.b.Observe(ctx(t), d)
	}
	if o.Endpoint == "" || o.Ready {
		t.Fatalf("want a running VM with an endpoint, not Ready yet: %+v", o)
	}
	inst, _ := e.fake.Instance(testProject, testZone, testName)
	if v := metadataValue(inst, MetadataEnableGuestAttributes); v != "TRUE" {
		t.Fatalf("metadata %s = %q, want TRUE: the guest could not report", MetadataEnableGuestAttributes, v)
	}
	ip, sum := natIP(inst), metadataValue(inst, MetadataConfigChecksum)
	report := func(state, reason string) func() {
		return func() {
			if err := e.fake.SetGuestAttribute(testProject, testZone, testName, GuestAttributePath, GuestReport(state, sum, e.clock.now(), reason)); err != nil {
				t.Fatal(err)
			}
		}
	}
	changed := desired(func(d *Desired) { d.Proxy.AllowedDestinations = []string{"api.example.org"} })
	steps := []struct {
		reason    string
		do        func()
		d         Desired
		wantReady bool
		wantMsg   string
	}{
		{
			reason:  "Running with an address, but the guest has not reported: not Ready, and the message says what it waits for.",
			do:      func() {},
			d:       d,
			wantMsg: fmt.Sprintf(msgFmtWaitGuest, ip, msgGuestNoReport),
		},
		{
			reason:  "The startup-script has begun.",
			do:      report(GuestStarting, ""),
			d:       d,
			wantMsg: fmt.Sprintf(msgFmtWaitGuest, ip, msgGuestStarting),
		},
		{
			reason:    "Squid serves the configuration of the spec: Ready.",
			do:        report(GuestServing, ""),
			d:         d,
			wantReady: true,
			wantMsg:   msgServing,
		},
		{
			reason:    "The spec changed: still Ready (the guest applies it live), and the message says so.",
			do:        func() {},
			d:         changed,
			wantReady: true,
			wantMsg:   fmt.Sprintf(msgFmtApplying, sum, mustSum(t, changed)),
		},
		{
			reason:  "The VM lost squid: back to not Ready, with the guest's reason.",
			do:      report(GuestFailed, "squid is not running"),
			d:       d,
			wantMsg: fmt.Sprintf(msgFmtGuestFailed, ip, "squid is not running"),
		},
		{
			reason:    "Squid is back.",
			do:        report(GuestServing, ""),
			d:         d,
			wantReady: true,
			wantMsg:   msgServing,
		},
		{
			reason:  "The guest stopped reporting: not Ready.",
			do:      func() { e.clock.advance(guestReportMaxAge + time.Minute) },
			d:       d,
			wantMsg: fmt.Sprintf(msgFmtWaitGuest, ip, fmt.Sprintf(msgFmtGuestStale, e.clock.now().UTC().Format(time.RFC3339))),
		},
	}
	for i, s := range steps {
		s.do()
		o, err := e.b.Observe(ctx(t), s.d)
		if err != nil {
			t.Fatalf("step %d: %s\nObserve: %v", i, s.reason, err)
		}
		if o.Ready != s.wantReady || o.Message != s.wantMsg {
			t.Errorf("step %d: %s\nwant %t %q\ngot  %t %q", i, s.reason, s.wantReady, s.wantMsg, o.Ready, o.Message)
		}
	}

	// A steady-state poll makes one call of its own, the guest's report: the
	// instance, its firewall rule and its address come from the shared
	// lists, which the last step's Observe made (see TestObserveCalls).
	report(GuestServing, "")()
	e.fake.ResetCalls()
	if o, err := e.b.Observe(ctx(t), d); err != nil || !o.Ready {
		t.Fatalf("Observe: %+v, %v", o, err)
	}
	want := map[string]int{gcpfake.CallInstancesGuestAttrs: 1}
	if diff := cmp.Diff(want, e.fake.CallCounts()); diff != "" {
		t.Errorf("calls of one steady-state Observe: -want +got:\n%s", diff)
	}
}

// TestReporterScript runs the reporter the startup-script installs against
// the fake's metadata server on loopback, with a stand-in squid.
func TestReporterScript(t *testing.T) {
	testenv.LookPath(t, "bash", "Debian package bash")
	e := newEnv(t)
	if err := e.b.Create(ctx(t), desired()); err != nil {
		t.Fatalf("Create: %v", err)
	}
	md := httptest.NewServer(e.fake.MetadataServer(testProject, testZone, testName))
	t.Cleanup(md.Close)

	// squid: a loopback listener that answers every request with 403.
	squidLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = squidLn.Close() })
	go func() {
		for {
			c, err := squidLn.Accept()
			if err != nil {
				return
			}
			go func() {
				// Like squid: read the request, then refuse it.
				_, _ = http.ReadRequest(bufio.NewReader(c))
				_, _ = c.Write([]byte("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"))
				_ = c.Close()
			}()
		}
	}()
	deadLn, _ := net.Listen("tcp", "127.0.0.1:0")
	deadPort := deadLn.Addr().(*net.TCPAddr).Port //nolint:forcetypeassert // A TCP listener.
	_ = deadLn.Close()

	dir := t.TempDir()
	conf := filepath.Join(dir, "squid.conf")
	const rendered = "http_port 3128\n"
	if err := os.WriteFile(conf, []byte(rendered), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := squid.Checksum([]byte(rendered))
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil { //nolint:gosec // A PATH directory.
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte("#!/bin/sh\nexit \"$(cat \"$(dirname \"$0\")/active\")\"\n"), 0o755); err != nil { //nolint:gosec // A stub.
		t.Fatal(err)
	}

	// What the traffic counter and the kernel would have written.
	counts := squid.Traffic{Allowed: 7, DeniedDestination: 5, DeniedClient: 2, DeniedAuth: 3, BytesToClients: 1234, BytesFromClients: 567}
	traffic, bootID := filepath.Join(dir, "traffic"), filepath.Join(dir, "boot_id")
	if err := os.WriteFile(traffic, []byte(counts.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bootID, []byte("6f1c0a9e-4b1c-4b9f-9a55-3f0d2c7e8b11\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason    string
		active    string
		port      int
		sum       string
		args      []string
		note      string
		wantExit  int
		wantState string
		wantWhy   string
	}{
		"Serving": {
			reason: "Squid runs with the rendered configuration and answers HTTP.", active: "0", port: squidLn.Addr().(*net.TCPAddr).Port, sum: sum, //nolint:forcetypeassert // TCP.
			wantState: GuestServing,
		},
		"NotRunning": {
			reason: "Squid's unit is not active.", active: "3", port: squidLn.Addr().(*net.TCPAddr).Port, sum: sum, //nolint:forcetypeassert // TCP.
			wantExit: 1, wantState: GuestFailed, wantWhy: "squid is not running",
		},
		"OtherConfig": {
			reason: "squid.conf is not the one the VM was made with.", active: "0", port: squidLn.Addr().(*net.TCPAddr).Port, sum: strings.Repeat("0", 64), //nolint:forcetypeassert // TCP.
			wantExit: 1, wantState: GuestFailed, wantWhy: conf + " is not the rendered configuration",
		},
		"NotListening": {
			reason: "Nothing listens on the proxy port.", active: "0", port: deadPort, sum: sum,
			wantExit: 1, wantState: GuestFailed, wantWhy: fmt.Sprintf("squid does not accept connections on port %d", deadPort),
		},
		"Explicit": {
			reason: "The startup-script reports a failure of its own, with the note about cloud-init.", active: "0", port: deadPort, sum: sum,
			args: []string{GuestFailed, "cannot install squid and nftables with apt-get"}, note: "cloud-init reports an error",
			wantExit: 1, wantState: GuestFailed, wantWhy: "cannot install squid and nftables with apt-get; cloud-init reports an error",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(bin, "active"), []byte(tc.active), 0o600); err != nil {
				t.Fatal(err)
			}
			script := filepath.Join(dir, "report")
			if err := os.WriteFile(script, []byte(reporterScript), 0o700); err != nil { //nolint:gosec // Executable.
				t.Fatal(err)
			}
			state := t.TempDir()
			for f, v := range map[string]string{"checksum": tc.sum + "\n", "port": fmt.Sprintf("%d\n", tc.port)} {
				if err := os.WriteFile(filepath.Join(state, f), []byte(v), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(c, "bash", append([]string{script}, tc.args...)...) //nolint:gosec // The test's script.
			cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "EGRESSPROXY_METADATA=" + strings.TrimPrefix(md.URL, "http://"), "EGRESSPROXY_REPORT_NOTE=" + tc.note,
				"EGRESSPROXY_STATE_DIR=" + state, "EGRESSPROXY_SQUID_CONF=" + conf, "EGRESSPROXY_TRAFFIC=" + traffic, "EGRESSPROXY_BOOT_ID=" + bootID}
			out, err := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != tc.wantExit {
				t.Fatalf("%s\nexit code %d, want %d (%v)\n%s", tc.reason, code, tc.wantExit, err, out)
			}
			v, ok := e.fake.GuestAttribute(testProject, testZone, testName, GuestAttributePath)
			r, parsed := parseGuestReport(v)
			if !ok || !parsed || r.state != tc.wantState || r.reason != tc.wantWhy || r.checksum != tc.sum || time.Since(r.at) > time.Minute {
				t.Errorf("%s\nthe guest attribute is %q (found %t), want state %q, reason %q, checksum %s, now", tc.reason, v, ok, tc.wantState, tc.wantWhy, tc.sum)
			}
			for p, want := range map[string]string{GuestTrafficPath: counts.String(), GuestBootIDPath: "6f1c0a9e-4b1c-4b9f-9a55-3f0d2c7e8b11"} {
				if got, _ := e.fake.GuestAttribute(testProject, testZone, testName, p); got != want {
					t.Errorf("%s\nguest attribute %s is %q, want %q", tc.reason, p, got, want)
				}
			}
		})
	}
}
