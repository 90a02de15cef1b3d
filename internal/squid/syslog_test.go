/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// TestAccessLogSyslogWithSquid shows what a VM's journal gets with
// AccessLogSyslog: one syslog message per request at the facility and
// priority asked for, whose text is the JSON line, and that TrafficAWK counts
// those lines as it counts the file's.
func TestAccessLogSyslogWithSquid(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root, to give squid a /dev/log of the test's own in a private mount namespace")
	}
	bin := squidBinary(t)
	testenv.LookPath(t, "unshare", "Debian package util-linux")
	awk := testenv.LookPath(t, "mawk", "Debian package mawk")

	dev, err := os.MkdirTemp("", "egressproxy-dev-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dev) })
	if err := os.Chmod(dev, 0o755); err != nil { //nolint:gosec // squid's user looks up /dev/log in it.
		t.Fatal(err)
	}
	sock := filepath.Join(dev, "log")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := os.Chmod(sock, 0o666); err != nil { //nolint:gosec // squid writes to it after dropping to user proxy.
		t.Fatal(err)
	}
	wrapper := filepath.Join(t.TempDir(), "squid")
	if err := os.WriteFile(wrapper, []byte(testenv.DevLogWrapper), 0o700); err != nil { //nolint:gosec // A script the test runs.
		t.Fatal(err)
	}
	t.Setenv("EGRESSPROXY_TEST_DEV", dev)
	t.Setenv("EGRESSPROXY_TEST_SQUID", bin)

	e := startProxyEnvWith(t, wrapper, func(c *Config) { c.AccessLogSyslog = "local4.info" }, nil)
	authed := e.client(testUser, testPass)
	for _, r := range []struct {
		c      proxyClient
		target string
		want   int
	}{
		{authed, e.plainURL("allowed.test"), http.StatusOK},
		{authed, e.plainURL("denied.test"), http.StatusForbidden},
		{e.client("", ""), e.plainURL("allowed.test"), http.StatusProxyAuthRequired},
	} {
		if got := r.c.get(t, r.target); got != r.want {
			t.Errorf("GET %s: %d, want %d", r.target, got, r.want)
		}
	}

	// local4 is facility 20; info is priority 6: <20*8+6>.
	const pri = "<166>"
	// The three requests, and the connections startSquid opened to see
	// squid listen, which squid logs as closed before a request.
	var lines []string
	requests := 0
	buf := make([]byte, 64<<10)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for requests < 3 {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("syslog messages so far %q: %v", lines, err)
		}
		m := strings.TrimSuffix(string(buf[:n]), "\n")
		if !strings.HasPrefix(m, pri) {
			t.Errorf("syslog message %q: want priority %s (local4.info)", m, pri)
		}
		_, text, ok := strings.Cut(m, " squid: ")
		if !ok {
			t.Errorf("syslog message %q has no tag squid", m)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			t.Errorf("syslog message text is not the JSON line: %v: %q", err, text)
		}
		lines = append(lines, m)
		if !strings.Contains(text, `"url":"error:`) {
			requests++
		}
	}

	out := filepath.Join(t.TempDir(), "traffic")
	cmd := exec.Command(awk, "-v", "out="+out, TrafficAWK) //nolint:gosec,noctx // The test's own awk.
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	if err := cmd.Run(); err != nil {
		t.Fatalf("awk: %v", err)
	}
	got, ok := ParseTraffic(readFile(out))
	if !ok {
		t.Fatalf("traffic file %q does not parse", readFile(out))
	}
	got.BytesToClients, got.BytesFromClients = 0, 0
	if diff := cmp.Diff(Traffic{Allowed: 1, DeniedDestination: 1, DeniedAuth: 1}, got); diff != "" {
		t.Errorf("TrafficAWK over the syslog messages: -want, +got:\n%s\n%s", diff, strings.Join(lines, "\n"))
	}
}
