/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// applyStub stands in for egressproxy-apply: it keeps its input, and fails
// (with squid's kind of message) while the file "fail" exists; otherwise it
// installs the files as the real one does.
const applyStub = `#!/bin/bash
set -eu
dir=$(dirname "$0")
cat >"$dir/apply.in"
echo x >>"$dir/apply.calls"
if [ -e "$dir/fail" ]; then echo "FATAL: Bungled squid.conf line 7" >&2; exit 1; fi
while read -r k v; do
  case $k in
    conf) printf '%s' "$v" | base64 -d >"$EGRESSPROXY_SQUID_CONF" ;;
    htpasswd) printf '%s' "$v" | base64 -d >"$EGRESSPROXY_HTPASSWD" ;;
  esac
done <"$dir/apply.in"
`

// TestWatcherScript runs the metadata watcher the startup-script installs
// against the fake's metadata server on loopback (its real wait_for_change),
// with stand-ins for egressproxy-apply and the reporter, while the backend
// changes the proxy.
func TestWatcherScript(t *testing.T) {
	testenv.LookPath(t, "bash", "Debian package bash")
	e := newEnv(t)
	d := desired()
	e.converge(t, d, 5)
	md := httptest.NewServer(e.fake.MetadataServer(testProject, testZone, testName))
	t.Cleanup(md.Close)

	dir := t.TempDir()
	conf, htpasswd, state := filepath.Join(dir, "squid.conf"), filepath.Join(dir, "htpasswd"), filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o755); err != nil { //nolint:gosec // A test directory.
		t.Fatal(err)
	}
	inst, _ := e.fake.Instance(testProject, testZone, testName)
	first, err := base64.StdEncoding.DecodeString(metadataValue(inst, MetadataSquidConf))
	if err != nil {
		t.Fatal(err)
	}
	// What the startup-script wrote at boot.
	for f, v := range map[string]string{conf: string(first), htpasswd: metadataValue(inst, MetadataHtpasswd)} {
		if err := os.WriteFile(f, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script, apply, report := filepath.Join(dir, "watch"), filepath.Join(dir, "apply"), filepath.Join(dir, "report")
	for f, v := range map[string]string{script: watcherScript, apply: applyStub, report: "#!/bin/sh\necho x >>\"$(dirname \"$0\")/report.calls\"\n"} {
		if err := os.WriteFile(f, []byte(v), 0o700); err != nil { //nolint:gosec // Executables.
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithCancel(t.Context())
	cmd := exec.CommandContext(wctx, "bash", script) //nolint:gosec // The test's own script.
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + dir, "EGRESSPROXY_METADATA=" + strings.TrimPrefix(md.URL, "http://"),
		"EGRESSPROXY_STATE_DIR=" + state, "EGRESSPROXY_SQUID_CONF=" + conf, "EGRESSPROXY_HTPASSWD=" + htpasswd,
		"EGRESSPROXY_APPLY=" + apply, "EGRESSPROXY_REPORTER=" + report}
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("the watcher's output:\n%s", out)
		}
	})

	// until waits for the watcher's report of what it applied.
	until := func(state, reason string, d Desired) {
		t.Helper()
		inst, _ := e.fake.Instance(testProject, testZone, testName)
		want := AppliedConfig(mustSum(t, d), metadataValue(inst, MetadataHtpasswd))
		deadline := time.Now().Add(30 * time.Second)
		var v string
		for time.Now().Before(deadline) {
			v, _ = e.fake.GuestAttribute(testProject, testZone, testName, GuestApplyPath)
			if r, ok := parseGuestReport(v); ok && r.state == state && r.checksum == want && r.reason == reason {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("the watcher reported %q, want %s %s %q", v, state, want, reason)
	}
	read := func(f string) string {
		t.Helper()
		b, _ := os.ReadFile(filepath.Join(dir, f)) //nolint:gosec // The test's files.
		return string(b)
	}

	// The first pass finds squid's files current: it reports them applied
	// and hands nothing to egressproxy-apply.
	e.guestReports(t, GuestServing, "") // the watcher's report replaces it
	until(GuestApplied, "", d)
	if n := strings.Count(read("apply.calls"), "x"); n != 0 {
		t.Errorf("egressproxy-apply ran %d times for the configuration squid has", n)
	}

	// A new allowlist: the backend writes the metadata, and the watcher,
	// woken by the metadata server, applies it and reports.
	d.Proxy.AllowedDestinations = []string{"api.example.org"}
	if err := e.b.Update(ctx(t), d); err != nil {
		t.Fatalf("Update: %v", err)
	}
	until(GuestApplied, "", d)
	inst, _ = e.fake.Instance(testProject, testZone, testName)
	conf2, _ := base64.StdEncoding.DecodeString(metadataValue(inst, MetadataSquidConf))
	wantIn := fmt.Sprintf("conf %s\nhtpasswd %s\nport 3128\n", base64.StdEncoding.EncodeToString(conf2),
		base64.StdEncoding.EncodeToString([]byte(metadataValue(inst, MetadataHtpasswd))))
	if got := read("apply.in"); got != wantIn {
		t.Errorf("egressproxy-apply's input:\n%q\nwant\n%q", got, wantIn)
	}
	if got := read("state/checksum"); got != mustSum(t, d)+"\n" || read("state/port") != "3128\n" {
		t.Errorf("the reporter's state: checksum %q port %q, want the new checksum and 3128", got, read("state/port"))
	}
	if read("report.calls") == "" {
		t.Error("the watcher did not run the reporter after the apply")
	}

	// New credentials that squid refuses: reported with squid's reason, and
	// Update returns it.
	if err := os.WriteFile(filepath.Join(dir, "fail"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d.Credentials.Password = "rotated"
	if err := e.b.Update(ctx(t), d); err != nil {
		t.Fatalf("Update: %v", err)
	}
	until(GuestFailed, "FATAL: Bungled squid.conf line 7", d)
	if err := e.b.Update(ctx(t), d); err == nil || !strings.Contains(err.Error(), "FATAL: Bungled squid.conf line 7") {
		t.Errorf("Update after the failed apply = %v, want the guest's reason", err)
	}
	if got := read("state/checksum"); got != mustSum(t, d)+"\n" {
		t.Errorf("a failed apply changed the reporter's checksum to %q", got)
	}
	if n := strings.Count(read("apply.calls"), "x"); n != 2 {
		t.Errorf("egressproxy-apply ran %d times, want 2", n)
	}
}
