/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// noForwarding are test-only lines appended to the rendered config: squid
// may forward nothing (never_direct without a cache_peer: it answers 502) and
// asks only loopback for names. An allowed request then gets 502 and a
// request http_access denies gets 403, so the test tells them apart without a
// single packet to a metadata address, even if the deny rules regress.
var noForwarding = []string{"never_direct allow all", "dns_nameservers 127.0.0.1"}

// TestSquidLoopbackMetadata shows the metadata servers are refused by squid
// itself (403, TCP_DENIED) with the private-address check off and them
// allowlisted every way: by CIDR, by name, and through a name that resolves
// to 169.254.169.254.
func TestSquidLoopbackMetadata(t *testing.T) {
	e := startProxyEnv(t, func(c *Config) {
		c.DenyPrivateDestinations = false
		c.Destinations = []string{"allowed.test", "meta.test", "metadata.google.internal", "169.254.0.0/16", "64:ff9b::/96", "fd20:ce::/32"}
		c.ConnectPorts = append(c.ConnectPorts, 443)
		c.HTTPPorts = append(c.HTTPPorts, 80)
	}, []string{
		// Only the name rule can refuse this one: it resolves to loopback.
		"127.0.0.1 metadata.google.internal",
		// Only the address rule can refuse this one.
		"169.254.169.254 meta.test",
	}, noForwarding...)
	authed := e.client(testUser, testPass)

	// The control: an allowed request is not forwarded (squid answers 502 or
	// 503, by version), so a 403 below can only come from http_access.
	if got := authed.get(t, e.plainURL("allowed.test")); got == http.StatusOK || got == http.StatusForbidden {
		t.Fatalf("GET %s with forwarding off: status %d, want squid's cannot-forward error\n%s", e.plainURL("allowed.test"), got, readFile(e.dir.file("access.log")))
	}

	cases := map[string]struct {
		reason string
		target string
	}{
		"IPv4":            {"The IPv4 metadata address is refused although 169.254.0.0/16 is allowed.", "http://169.254.169.254/computeMetadata/v1/"},
		"IPv4Connect":     {"CONNECT to the IPv4 metadata address is refused.", "https://169.254.169.254/"},
		"IPv4Mapped":      {"The IPv4-mapped form is the same address to squid.", "http://[::ffff:169.254.169.254]/"},
		"NAT64":           {"169.254.169.254 through NAT64 is refused.", "http://[64:ff9b::a9fe:a9fe]/"},
		"IPv6":            {"GCE's IPv6 metadata address is refused although fd20:ce::/32 is allowed.", "http://[fd20:ce::254]/computeMetadata/v1/"},
		"IPv6Connect":     {"CONNECT to GCE's IPv6 metadata address is refused.", "https://[fd20:ce::254]/"},
		"Name":            {"metadata.google.internal is refused by name although it is allowed.", "http://metadata.google.internal/computeMetadata/v1/"},
		"NameConnect":     {"CONNECT to metadata.google.internal is refused.", "https://metadata.google.internal/"},
		"NameUpperCase":   {"Names match whatever their case.", "http://Metadata.Google.Internal/"},
		"ResolvesToIt":    {"An allowed name that resolves to 169.254.169.254 is refused.", "http://meta.test/"},
		"ResolvesConnect": {"CONNECT to an allowed name that resolves to 169.254.169.254 is refused.", "https://meta.test/"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := authed.get(t, tc.target); got != http.StatusForbidden {
				t.Errorf("\n%s\nGET %s: status %d, want %d", tc.reason, tc.target, got, http.StatusForbidden)
			}
		})
	}
	t.Run("AccessLogSaysDenied", func(t *testing.T) { checkDenied(t, e.dir.file("access.log"), len(cases)) })
}

// checkDenied shows squid logged n requests to the metadata hosts, each as
// TCP_DENIED/403: refused before any connection was tried.
func checkDenied(t *testing.T, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var denied, other []string
		for _, l := range strings.Split(strings.TrimSpace(readFile(path)), "\n") {
			var e struct {
				URL, Host, Result string
				Status            int
			}
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("access log line is not JSON: %v: %s", err, l)
			}
			if !strings.Contains(e.URL, "169.254.169.254") && !strings.Contains(e.URL, "fd20:ce::254") && !strings.Contains(e.URL, "a9fe:a9fe") &&
				!strings.Contains(strings.ToLower(e.URL), "metadata.google.internal") && !strings.Contains(e.URL, "meta.test") {
				continue
			}
			if e.Result == "TCP_DENIED" && e.Status == http.StatusForbidden {
				denied = append(denied, l)
			} else {
				other = append(other, l)
			}
		}
		if len(other) > 0 {
			t.Fatalf("metadata requests squid did not deny outright:\n%s", strings.Join(other, "\n"))
		}
		if len(denied) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("access log has %d TCP_DENIED/403 metadata lines, want %d:\n%s", len(denied), n, readFile(path))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
