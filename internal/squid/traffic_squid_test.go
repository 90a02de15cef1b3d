/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// Passwords that must never reach a log line. They are distinctive, so a
// match is no accident.
const (
	wrongPass = "wrong-pass-7c1e"
	urlPass   = "url-pass-93ab"
)

// awkCounter is TrafficAWK reading squid's access log from a FIFO, as the
// Kubernetes backend runs it.
type awkCounter struct {
	fifo, out string
	stdout    *syncBuffer
}

// startAWKCounter starts mawk on a FIFO squid will write its access log to.
// The shell opens the FIFO, so it waits for squid; once squid stops, mawk
// reads the end of its input and exits.
func startAWKCounter(t *testing.T, d squidDir) awkCounter {
	t.Helper()
	awk := testenv.LookPath(t, "mawk", "Debian package mawk (every Debian and Ubuntu image has it)")
	c := awkCounter{fifo: d.file("access.fifo"), out: d.file("traffic"), stdout: &syncBuffer{}}
	if err := syscall.Mkfifo(c.fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(c.fifo, d.uid, d.gid); err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd := exec.Command("sh", "-c", `exec "$0" -v out="$1" "$2" <"$3"`, awk, c.out, TrafficAWK, c.fifo) //nolint:gosec,noctx // The test's own awk; stopped below.
	cmd.Stdout, cmd.Stderr = c.stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if s := stderr.String(); s != "" {
			t.Errorf("awk wrote to stderr: %s", s)
		}
	})
	return c
}

// rawStatus sends req on a new connection from local (empty: any address)
// and returns the status line squid answers with.
func rawStatus(t *testing.T, proxy, local, req string) string {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	c, err := d.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("no answer to %q: %v", req, err)
	}
	return strings.TrimSpace(line)
}

func basicAuth(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// TestTrafficAWKWithSquid drives every class of request through a real squid,
// feeds its access log through TrafficAWK (real mawk, through a FIFO as on
// Kubernetes) and reads the counts back with ParseTraffic.
func TestTrafficAWKWithSquid(t *testing.T) {
	var counter awkCounter
	e := startProxyEnv(t, func(c *Config) {
		d := newSquidDirFrom(c)
		counter = startAWKCounter(t, d)
		c.AccessLog = counter.fifo
	}, nil)

	// Zeros exist as soon as awk runs.
	waitTraffic(t, e, counter.out, Traffic{})

	authed := e.client(testUser, testPass)
	outside := authed
	outside.localAddr = "127.0.0.2"
	outsideAnon := e.client("", "")
	outsideAnon.localAddr = "127.0.0.2"
	mgr := "GET http://" + e.proxy + "/squid-internal-mgr/info HTTP/1.1\r\nHost: " + e.proxy +
		"\r\nProxy-Authorization: Basic " + basicAuth(testUser, testPass) + "\r\nConnection: close\r\n\r\n"
	inURL := "GET http://" + testUser + ":" + urlPass + "@allowed.test:" + e.plainPort + "/?token=" + urlPass + " HTTP/1.1\r\nHost: allowed.test:" + e.plainPort +
		"\r\nProxy-Authorization: Basic " + basicAuth(testUser, testPass) + "\r\nConnection: close\r\n\r\n"

	const (
		allowed     = "allowed"
		destination = "destination"
		client      = "client"
		auth        = "auth"
	)
	cases := []struct {
		name  string
		class string
		do    func() int
		want  int
	}{
		{"PlainAllowed", allowed, func() int { return authed.get(t, e.plainURL("allowed.test")) }, http.StatusOK},
		{"PlainAllowedAgain", allowed, func() int { return authed.get(t, e.plainURL("allowed.test")) }, http.StatusOK},
		{"ConnectAllowed", allowed, func() int { return authed.get(t, e.connectURL("allowed.test")) }, http.StatusOK},
		{"ConnectAllowedAgain", allowed, func() int { return authed.get(t, e.connectURL("allowed.test")) }, http.StatusOK},
		{"PlainNotAllowed", destination, func() int { return authed.get(t, e.plainURL("denied.test")) }, http.StatusForbidden},
		{"ConnectNotAllowed", destination, func() int { return authed.get(t, e.connectURL("denied.test")) }, http.StatusForbidden},
		{"IPLiteralNotAllowed", destination, func() int { return authed.get(t, e.plainURL("127.0.0.1")) }, http.StatusForbidden},
		{"ConnectPortNotAllowed", destination, func() int { return authed.get(t, "https://allowed.test:"+e.plainPort+"/") }, http.StatusForbidden},
		{"PlainPortNotAllowed", destination, func() int { return authed.get(t, "http://allowed.test:"+e.tlsPort+"/") }, http.StatusForbidden},
		{"CacheManager", destination, func() int { return statusOf(t, rawStatus(t, e.proxy, "", mgr)) }, http.StatusForbidden},
		{"NoCredentials", auth, func() int { return e.client("", "").get(t, e.plainURL("allowed.test")) }, http.StatusProxyAuthRequired},
		{"ConnectNoCredentials", auth, func() int { return e.client("", "").get(t, e.connectURL("allowed.test")) }, http.StatusProxyAuthRequired},
		{"NoCredentialsBadPort", auth, func() int { return e.client("", "").get(t, "http://allowed.test:"+e.tlsPort+"/") }, http.StatusProxyAuthRequired},
		{"WrongPassword", auth, func() int { return e.client(testUser, wrongPass).get(t, e.plainURL("allowed.test")) }, http.StatusProxyAuthRequired},
		{"UnknownUser", auth, func() int { return e.client("team-b", wrongPass).get(t, e.plainURL("allowed.test")) }, http.StatusProxyAuthRequired},
		{"OutsideClient", client, func() int { return outside.get(t, e.plainURL("allowed.test")) }, http.StatusForbidden},
		{"OutsideClientNoCredentials", client, func() int { return outsideAnon.get(t, e.connectURL("allowed.test")) }, http.StatusForbidden},
		{"CredentialsInURL", allowed, func() int { return statusOf(t, rawStatus(t, e.proxy, "", inURL)) }, http.StatusOK},
	}
	var want Traffic
	for _, tc := range cases {
		if got := tc.do(); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
		switch tc.class {
		case allowed:
			want.Allowed++
		case destination:
			want.DeniedDestination++
		case client:
			want.DeniedClient++
		case auth:
			want.DeniedAuth++
		}
	}
	// The provider's own probes: neither printed nor counted.
	probe := "GET " + ProbeURL + " HTTP/1.0\r\n\r\n"
	if got := rawStatus(t, e.proxy, "", probe); !strings.HasPrefix(got, "HTTP/1.") {
		t.Errorf("probe: %q, want an HTTP status line", got)
	}
	tcpProbe(t, e.proxy)

	waitTraffic(t, e, counter.out, want)
	lines := strings.Split(strings.TrimSpace(counter.stdout.String()), "\n")
	var bytesTo, bytesFrom uint64
	for _, l := range lines {
		var r struct {
			Client, User, URL string
			Status            int
			Sent              uint64 `json:"bytes_sent"`
			Received          uint64 `json:"bytes_received"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Errorf("awk printed a line that is not JSON: %v: %s", err, l)
			continue
		}
		bytesTo += r.Sent
		bytesFrom += r.Received
		if r.URL == ProbeURL || strings.HasPrefix(r.URL, "error:transaction-end-before-headers") {
			t.Errorf("awk printed a probe line: %s", l)
		}
		for _, secret := range []string{testPass, wrongPass, urlPass, basicAuth(testUser, testPass)} {
			if strings.Contains(l, secret) {
				t.Errorf("an access log line holds a secret (%q): %s", secret, l)
			}
		}
	}
	if len(lines) != len(cases) {
		t.Errorf("awk printed %d lines, want one per request (%d):\n%s", len(lines), len(cases), strings.Join(lines, "\n"))
	}
	want.BytesToClients, want.BytesFromClients = bytesTo, bytesFrom
	if want.BytesToClients == 0 || want.BytesFromClients == 0 {
		t.Errorf("no bytes in the log: %+v", want)
	}
	got, _ := ParseTraffic(readFile(counter.out))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("traffic file: -want, +got:\n%s\nlog:\n%s", diff, strings.Join(lines, "\n"))
	}

	t.Run("ContinuesFromInit", func(t *testing.T) { checkInit(t, lines, got) })
}

// newSquidDirFrom recovers the squidDir startProxyEnv made from the Config it
// passes to mod.
func newSquidDirFrom(c *Config) squidDir {
	d := squidDir{path: filepath.Dir(c.PIDFile), uid: -1, gid: -1}
	if fi, err := os.Stat(d.path); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
			d.uid, d.gid = int(st.Uid), int(st.Gid)
		}
	}
	return d
}

func statusOf(t *testing.T, line string) int {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 2 {
		t.Fatalf("not a status line: %q", line)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("not a status line: %q", line)
	}
	return n
}

// tcpProbe connects and closes without a request, as a tcpSocket probe does.
func tcpProbe(t *testing.T, proxy string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxy, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
}

// waitTraffic waits until the traffic file holds want's request counts,
// ticking the log with probes (as the health probes do in production) so awk
// writes the last second's counts.
func waitTraffic(t *testing.T, e proxyEnv, out string, want Traffic) {
	t.Helper()
	want.BytesToClients, want.BytesFromClients = 0, 0
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, ok := ParseTraffic(readFile(out))
		got.BytesToClients, got.BytesFromClients = 0, 0
		if ok && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("traffic file after 15s: %q (parsed: %v), want the counts of %v", readFile(out), ok, want)
		}
		time.Sleep(300 * time.Millisecond)
		_ = rawStatus(t, e.proxy, "", "GET "+ProbeURL+" HTTP/1.0\r\n\r\n")
	}
}

// checkInit feeds the same log lines to awk again, continuing from the counts
// they made (init), and from a missing file (zeros).
func checkInit(t *testing.T, lines []string, first Traffic) {
	t.Helper()
	awk := testenv.LookPath(t, "mawk", "Debian package mawk")
	dir := t.TempDir()
	init := dir + "/traffic"
	if err := os.WriteFile(init, []byte(first.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	double := Traffic{}
	for i, f := range double.fields() {
		*f = 2 * *first.fields()[i]
	}
	cases := map[string]struct {
		init string
		want Traffic
	}{
		"FromEarlierCounts": {init, double},
		"FromMissingFile":   {dir + "/missing", first},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(awk, "-v", "out="+init, "-v", "init="+tc.init, TrafficAWK) //nolint:gosec,noctx // The test's own awk.
			cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
			printed, err := cmd.Output()
			if err != nil {
				t.Fatalf("awk: %v", err)
			}
			if diff := cmp.Diff(lines, strings.Split(strings.TrimSpace(string(printed)), "\n")); diff != "" {
				t.Errorf("awk's output: -want, +got:\n%s", diff)
			}
			got, _ := ParseTraffic(readFile(init))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("traffic file: -want, +got:\n%s", diff)
			}
			if err := os.WriteFile(init, []byte(first.String()+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		})
	}
}
