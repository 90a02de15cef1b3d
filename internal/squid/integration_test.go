/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const (
	testUser   = "team-a"
	testPass   = "first-secret"
	originBody = "hello from the origin"
)

// proxyClient is one HTTP client configuration that goes through squid.
type proxyClient struct {
	proxy     string // host:port of squid
	user      string // empty sends no credentials
	pass      string
	localAddr string // optional source address
	roots     *x509.CertPool
}

// get fetches target through the proxy and returns the status code: the
// origin's, or squid's answer to the request or to the CONNECT.
func (p proxyClient) get(t *testing.T, target string) int {
	t.Helper()
	pu := &url.URL{Scheme: "http", Host: p.proxy}
	if p.user != "" {
		pu.User = url.UserPassword(p.user, p.pass)
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if p.localAddr != "" {
		dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(p.localAddr)}
	}
	connectStatus := 0
	tr := &http.Transport{
		Proxy:             http.ProxyURL(pu),
		DialContext:       dialer.DialContext,
		DisableKeepAlives: true,
		// httptest's certificate is for example.com; the name in the URL
		// is the one squid's ACLs and hosts file know.
		TLSClientConfig: &tls.Config{RootCAs: p.roots, ServerName: "example.com", MinVersion: tls.VersionTLS12},
		OnProxyConnectResponse: func(_ context.Context, _ *url.URL, _ *http.Request, res *http.Response) error {
			connectStatus = res.StatusCode
			return nil
		},
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.RoundTrip(req)
	if err != nil {
		if connectStatus != 0 && connectStatus != http.StatusOK {
			return connectStatus
		}
		t.Fatalf("GET %s through %s: %v", target, p.proxy, err)
	}
	defer func() { _ = res.Body.Close() }()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode == http.StatusOK && string(body) != originBody {
		t.Errorf("GET %s: body %q, want the origin's %q", target, body, originBody)
	}
	return res.StatusCode
}

func portOf(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

// proxyEnv is a running squid in front of a plain and a TLS origin.
type proxyEnv struct {
	dir                  squidDir
	htpasswd             string
	proxy                string
	plainPort, tlsPort   string
	roots                *x509.CertPool
	plainURL, connectURL func(host string) string
	// forwardedFor holds the X-Forwarded-For values of the last request an
	// origin saw.
	forwardedFor *atomic.Pointer[[]string]
}

// startProxyEnv starts the origins and a squid rendered from Config mod
// applies to, with the extra lines appended; allowed.test, denied.test and
// private.test resolve to 127.0.0.1, and so does every line of hosts.
func startProxyEnv(t *testing.T, mod func(*Config), hosts []string, extra ...string) proxyEnv {
	t.Helper()
	return startProxyEnvWith(t, squidBinary(t), mod, hosts, extra...)
}

// startProxyEnvWith is startProxyEnv with squid started as bin (a wrapper).
func startProxyEnvWith(t *testing.T, bin string, mod func(*Config), hosts []string, extra ...string) proxyEnv {
	t.Helper()
	xff := &atomic.Pointer[[]string]{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Values("X-Forwarded-For")
		xff.Store(&v)
		_, _ = io.WriteString(w, originBody)
	})
	plain := httptest.NewServer(h)
	t.Cleanup(plain.Close)
	secure := httptest.NewTLSServer(h)
	t.Cleanup(secure.Close)

	e := proxyEnv{dir: newSquidDir(t), plainPort: portOf(t, plain.URL), tlsPort: portOf(t, secure.URL), roots: x509.NewCertPool(), forwardedFor: xff}
	e.roots.AddCert(secure.Certificate())
	e.plainURL = func(host string) string { return "http://" + net.JoinHostPort(host, e.plainPort) + "/" }
	e.connectURL = func(host string) string { return "https://" + net.JoinHostPort(host, e.tlsPort) + "/" }

	file, err := Htpasswd(testUser, testPass)
	if err != nil {
		t.Fatal(err)
	}
	e.htpasswd = e.dir.write(t, "htpasswd", file, 0o640)
	hostsFile := e.dir.write(t, "hosts", []byte(strings.Join(append([]string{"127.0.0.1 allowed.test denied.test private.test"}, hosts...), "\n")+"\n"), 0o644)
	tlsPort, _ := strconv.Atoi(e.tlsPort)
	plainPort, _ := strconv.Atoi(e.plainPort)
	port := freeLoopbackPort(t)
	c := Config{
		ListenAddress: "127.0.0.1",
		Port:          port,
		ClientCIDRs:   []string{"127.0.0.1/32"},
		// Loopback targets need the private-address check off and an
		// explicit entry; the production default denies them.
		Destinations: []string{"allowed.test"},
		ConnectPorts: []int32{int32(tlsPort)},   //nolint:gosec // A TCP port fits.
		HTTPPorts:    []int32{int32(plainPort)}, //nolint:gosec // A TCP port fits.
		HtpasswdPath: e.htpasswd,
		PIDFile:      e.dir.file("squid.pid"),
		CacheLog:     e.dir.file("cache.log"),
		AccessLog:    e.dir.file("access.log"),
		CoredumpDir:  e.dir.path,
		HostsFile:    hostsFile,
	}
	mod(&c)
	conf, err := Render(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range extra {
		conf = append(conf, l+"\n"...)
	}
	e.proxy = net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	startSquid(t, bin, e.dir, conf, e.proxy)
	return e
}

func (e proxyEnv) client(user, pass string) proxyClient {
	return proxyClient{proxy: e.proxy, user: user, pass: pass, roots: e.roots}
}

func TestSquidLoopback(t *testing.T) {
	e := startProxyEnv(t, func(*Config) {}, nil)
	authed := e.client(testUser, testPass)
	otherSource := authed
	otherSource.localAddr = "127.0.0.2"

	cases := map[string]struct {
		reason string
		client proxyClient
		target string
		want   int
	}{
		"PlainAllowed":          {"An allowed name over plain HTTP reaches the origin.", authed, e.plainURL("allowed.test"), http.StatusOK},
		"ConnectAllowed":        {"An allowed name over CONNECT to an allowed port reaches the TLS origin.", authed, e.connectURL("allowed.test"), http.StatusOK},
		"PlainNotAllowed":       {"A name outside the allowlist is forbidden.", authed, e.plainURL("denied.test"), http.StatusForbidden},
		"ConnectNotAllowed":     {"CONNECT to a name outside the allowlist is forbidden.", authed, e.connectURL("denied.test"), http.StatusForbidden},
		"IPLiteralNotAllowed":   {"The address an allowed name resolves to is not itself allowed.", authed, e.plainURL("127.0.0.1"), http.StatusForbidden},
		"ConnectPortNotAllowed": {"CONNECT to a port outside connectPorts is forbidden.", authed, "https://allowed.test:" + e.plainPort + "/", http.StatusForbidden},
		"PlainPortNotAllowed":   {"Plain HTTP to a port outside httpPorts (here the TLS origin's) is forbidden.", authed, "http://allowed.test:" + e.tlsPort + "/", http.StatusForbidden},
		"PlainNoCredentials":    {"No credentials are challenged.", e.client("", ""), e.plainURL("allowed.test"), http.StatusProxyAuthRequired},
		"ConnectNoCredentials":  {"CONNECT without credentials is challenged.", e.client("", ""), e.connectURL("allowed.test"), http.StatusProxyAuthRequired},
		"WrongPassword":         {"A wrong password is challenged.", e.client(testUser, "wrong"), e.plainURL("allowed.test"), http.StatusProxyAuthRequired},
		"UnknownUser":           {"An unknown user is challenged.", e.client("team-b", testPass), e.plainURL("allowed.test"), http.StatusProxyAuthRequired},
		"UserIsCaseSensitive":   {"User names are case sensitive.", e.client("Team-A", testPass), e.plainURL("allowed.test"), http.StatusProxyAuthRequired},
		"ClientNotAllowed":      {"A source outside clientCIDRs is refused before authentication.", otherSource, e.plainURL("allowed.test"), http.StatusForbidden},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.client.get(t, tc.target); got != tc.want {
				t.Errorf("\n%s\nGET %s: status %d, want %d", tc.reason, tc.target, got, tc.want)
			}
		})
	}
	t.Run("ForwardedForIsUnknown", func(t *testing.T) { checkForwardedFor(t, e) })
	t.Run("AccessLogIsJSON", func(t *testing.T) { checkAccessLog(t, e.dir.file("access.log")) })
	t.Run("PasswordRotation", func(t *testing.T) { checkRotation(t, e) })
}

// checkForwardedFor shows the origin gets "X-Forwarded-For: unknown": no
// client address, and a header the cloud metadata servers refuse requests
// for.
func checkForwardedFor(t *testing.T, e proxyEnv) {
	t.Helper()
	e.forwardedFor.Store(nil)
	if got := e.client(testUser, testPass).get(t, e.plainURL("allowed.test")); got != http.StatusOK {
		t.Fatalf("GET allowed.test: status %d, want %d", got, http.StatusOK)
	}
	got := e.forwardedFor.Load()
	if got == nil {
		t.Fatal("the origin saw no request")
	}
	if want := []string{"unknown"}; !slices.Equal(*got, want) {
		t.Errorf("X-Forwarded-For at the origin: %q, want %q", *got, want)
	}
}

// checkRotation rewrites the htpasswd file under the running squid and shows
// the new password works, and the old one stops working, without a restart.
func checkRotation(t *testing.T, e proxyEnv) {
	t.Helper()
	before, err := os.Stat(e.htpasswd)
	if err != nil {
		t.Fatal(err)
	}
	file, err := Htpasswd(testUser, "second-secret")
	if err != nil {
		t.Fatal(err)
	}
	e.dir.write(t, "htpasswd", file, 0o640)
	// basic_ncsa_auth compares the mtime in whole seconds; a real rotation
	// comes long after the first write, which this stands in for.
	mtime := before.ModTime().Add(2 * time.Second)
	if err := os.Chtimes(e.htpasswd, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	url := e.plainURL("allowed.test")
	if got := e.client(testUser, "second-secret").get(t, url); got != http.StatusOK {
		t.Errorf("after rotation, new password: status %d, want %d", got, http.StatusOK)
	}
	if got := e.client(testUser, testPass).get(t, url); got != http.StatusProxyAuthRequired {
		t.Errorf("after rotation, old password: status %d, want %d", got, http.StatusProxyAuthRequired)
	}
}

// checkAccessLog shows every access log line is a JSON object and the
// allowed request is logged with its user, client, method, URL and status.
func checkAccessLog(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		lines := strings.Split(strings.TrimSpace(readFile(path)), "\n")
		found, err := findAllowed(lines)
		if err != nil {
			t.Fatal(err)
		}
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("access log has no line for the allowed request by %s:\n%s", testUser, strings.Join(lines, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func findAllowed(lines []string) (bool, error) {
	found := false
	for _, l := range lines {
		var e struct {
			User, Client, Method, URL, Host string
			Status                          int
			BytesSent                       int `json:"bytes_sent"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			return false, fmt.Errorf("access log line is not JSON: %w: %s", err, l)
		}
		if e.User == testUser && e.Client == "127.0.0.1" && e.Method == http.MethodGet &&
			strings.Contains(e.URL, "allowed.test") && e.Host == "allowed.test" && e.Status == http.StatusOK && e.BytesSent > 0 {
			found = true
		}
	}
	return found, nil
}

func TestSquidLoopbackDenyPrivate(t *testing.T) {
	e := startProxyEnv(t, func(c *Config) { c.DenyPrivateDestinations = true }, nil)
	authed := e.client(testUser, testPass)
	cases := map[string]struct {
		reason string
		client proxyClient
		target string
	}{
		"Plain":     {"An allowed name that resolves to loopback is refused.", authed, e.plainURL("allowed.test")},
		"Connect":   {"CONNECT to an allowed name that resolves to loopback is refused.", authed, e.connectURL("allowed.test")},
		"IPLiteral": {"A loopback address is refused.", authed, e.plainURL("127.0.0.1")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.client.get(t, tc.target); got != http.StatusForbidden {
				t.Errorf("\n%s\nGET %s: status %d, want %d", tc.reason, tc.target, got, http.StatusForbidden)
			}
		})
	}
}

// TestSquidLoopbackIPv6ClientCIDR shows an IPv6 client CIDR admits no IPv4
// client: squid matches IPv6 prefixes around ::ffff:0:0/96, such as ::/8,
// against IPv4 addresses too, so Render must rewrite them.
func TestSquidLoopbackIPv6ClientCIDR(t *testing.T) {
	e := startProxyEnv(t, func(c *Config) { c.ClientCIDRs = []string{"::/8"} }, nil)
	// Without credentials, a client past the client check is challenged
	// (407); one refused by it gets 403.
	if got := e.client("", "").get(t, e.plainURL("allowed.test")); got != http.StatusForbidden {
		t.Errorf("GET through a proxy for clients in ::/8 from 127.0.0.1: status %d, want %d", got, http.StatusForbidden)
	}
}
