/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// typical is a Config as a backend would build it.
func typical(mods ...func(*Config)) Config {
	c := Config{
		Port:         3128,
		ClientCIDRs:  []string{"10.0.0.0/8", "192.168.0.0/16"},
		Destinations: []string{"api.github.com", ".googleapis.com", "203.0.113.0/24", "2001:db8::/32"},
		ConnectPorts: []int32{443},
		HTTPPorts:    []int32{80, 443},
	}
	for _, m := range mods {
		m(&c)
	}
	return c
}

// renderCase is shared with TestRenderParsesWithSquid, so every rendered
// table case is also checked by the real squid.
type renderCase struct {
	reason string
	c      Config
	// want are lines that must appear, in this order, in the output.
	want []string
	// absent are lines that must not appear.
	absent []string
}

func renderCases() map[string]renderCase {
	return map[string]renderCase{
		"Typical": {
			reason: "A typical config listens on the port, admits the client CIDRs and allows the destinations after every deny.",
			c:      typical(),
			want: []string{
				"http_port 3128",
				"via off",
				"forwarded_for off",
				"cache deny all",
				"auth_param basic program /usr/lib/squid/basic_ncsa_auth /etc/squid/egressproxy/htpasswd",
				"acl ep_clients src 10.0.0.0/8",
				"acl ep_clients src 192.168.0.0/16",
				"acl ep_connect_ports port 443",
				"acl ep_http_ports port 80",
				"acl ep_http_ports port 443",
				"acl ep_metadata dst 169.254.169.254/32",
				"acl ep_metadata dst 64:ff9b::a9fe:a9fe/128",
				"acl ep_metadata dst fd00:ec2::254/128",
				"acl ep_metadata dst fd20:ce::254/128",
				"acl ep_metadata_names dstdomain -n .metadata.google.internal",
				"acl ep_dst_names dstdomain -n .googleapis.com",
				"acl ep_dst_names dstdomain -n api.github.com",
				"acl ep_dst_nets dst 203.0.113.0/24",
				"acl ep_dst_nets dst 2001:db8::/32",
				"http_access deny !ep_clients",
				"http_access deny !ep_authed",
				"http_access deny manager",
				"http_access deny !ep_connect !ep_http",
				"http_access deny ep_connect !ep_connect_ports",
				"http_access deny !ep_connect !ep_http_ports",
				"http_access deny ep_metadata_names",
				"http_access deny ep_metadata",
				"http_access allow ep_dst_names",
				"http_access allow ep_dst_nets",
				"http_access deny all",
			},
			absent: []string{"http_access deny ep_private", "hosts_file /etc/hosts", "forwarded_for delete"},
		},
		"MetadataDeniedWhateverTheAllowlist": {
			reason: "The metadata servers are denied by name and address before any allow, even with the private check off and them allowlisted.",
			c: typical(func(c *Config) {
				c.DenyPrivateDestinations = false
				c.Destinations = []string{"169.254.0.0/16", "fd20:ce::254", "metadata.google.internal", ".internal"}
			}),
			want: []string{
				"acl ep_metadata dst 169.254.169.254/32",
				"acl ep_metadata dst fd20:ce::254/128",
				"acl ep_metadata_names dstdomain -n .metadata.google.internal",
				"acl ep_dst_names dstdomain -n .internal",
				"acl ep_dst_nets dst 169.254.0.0/16",
				"acl ep_dst_nets dst fd20:ce::254/128",
				"http_access deny ep_metadata_names",
				"http_access deny ep_metadata",
				"http_access allow ep_dst_names",
				"http_access allow ep_dst_nets",
				"http_access deny all",
			},
			absent: []string{"http_access deny ep_private"},
		},
		"NoHTTPPortsDeniesPlainHTTP": {
			reason: "No HTTP ports means no plain HTTP at all; CONNECT keeps its own ports.",
			c:      typical(func(c *Config) { c.HTTPPorts = nil }),
			want:   []string{"http_access deny !ep_authed", "http_access deny ep_connect !ep_connect_ports", "http_access deny !ep_connect"},
			absent: []string{"http_access deny !ep_connect !ep_http_ports"},
		},
		"HTTPPortsSortedAndDeduplicated": {
			reason: "HTTP ports are sorted and deduplicated like the CONNECT ports.",
			c:      typical(func(c *Config) { c.HTTPPorts = []int32{8080, 80, 8080} }),
			want:   []string{"acl ep_http_ports port 80", "acl ep_http_ports port 8080", "http_access deny !ep_connect !ep_http_ports"},
			absent: []string{"acl ep_http_ports port 443"},
		},
		"SuffixCoversExactNames": {
			reason: "squid refuses a dstdomain list with both example.com and .example.com, so a suffix swallows what it covers.",
			c: typical(func(c *Config) {
				c.Destinations = []string{"a.b.example.com", "Example.COM", ".b.example.com", ".example.com", "example.org", "notexample.com"}
			}),
			want: []string{
				"acl ep_dst_names dstdomain -n .example.com",
				"acl ep_dst_names dstdomain -n example.org",
				"acl ep_dst_names dstdomain -n notexample.com",
			},
			absent: []string{
				"acl ep_dst_names dstdomain -n example.com",
				"acl ep_dst_names dstdomain -n .b.example.com",
				"acl ep_dst_names dstdomain -n a.b.example.com",
			},
		},
		"NestedCIDRsAndBareAddresses": {
			reason: "Nested and duplicate prefixes collapse to the widest; a bare address is a host prefix.",
			c: typical(func(c *Config) {
				c.ClientCIDRs = []string{"10.1.0.0/16", "10.0.0.0/8", "10.0.0.0/8", "127.0.0.1", "::1"}
				c.Destinations = []string{"198.51.100.7", "2001:db8::1", "2001:db8::/64"}
			}),
			want: []string{
				"acl ep_clients src 10.0.0.0/8",
				"acl ep_clients src 127.0.0.1/32",
				"acl ep_clients src ::1/128",
				"acl ep_dst_nets dst 198.51.100.7/32",
				"acl ep_dst_nets dst 2001:db8::/64",
			},
			absent: []string{"acl ep_clients src 10.1.0.0/16", "acl ep_dst_nets dst 2001:db8::1/128", "http_access allow ep_dst_names"},
		},
		"AddressFamiliesStayApart": {
			reason: "squid reads 0.0.0.0/0 as all and matches IPv6 prefixes around ::ffff:0:0/96 against IPv4, so both are rewritten.",
			c:      typical(func(c *Config) { c.ClientCIDRs = []string{"0.0.0.0/0", "::/0"} }),
			want: []string{
				"acl ep_clients src 0.0.0.0/1",
				"acl ep_clients src 128.0.0.0/1",
				"acl ep_clients src ::/81",
				"acl ep_clients src ::fffe:0:0/96",
				"acl ep_clients src ::1:0:0:0/80",
				"acl ep_clients src 8000::/1",
			},
			absent: []string{"acl ep_clients src 0.0.0.0/0", "acl ep_clients src ::/0", "acl ep_clients src ::ffff:0:0/96"},
		},
		"DenyPrivateDestinations": {
			reason: "The private ranges are denied with a dst ACL after authentication and the metadata deny, and before any allow.",
			c:      typical(func(c *Config) { c.DenyPrivateDestinations = true }),
			want: []string{
				"acl ep_private dst 10.0.0.0/8",
				"acl ep_private dst 100.64.0.0/10",
				"acl ep_private dst 127.0.0.0/8",
				"acl ep_private dst 169.254.0.0/16",
				"acl ep_private dst 198.51.100.0/24",
				"acl ep_private dst ::/96",
				"acl ep_private dst 64:ff9b::/96",
				"acl ep_private dst 2002::/16",
				"acl ep_private dst fc00::/7",
				"acl ep_private dst fe80::/10",
				"http_access deny !ep_authed",
				"http_access deny ep_metadata",
				"http_access deny ep_private",
				"http_access allow ep_dst_names",
			},
		},
		"NoClientsDeniesAll": {
			reason: "No client CIDRs means no client: the first rule denies everything.",
			c:      typical(func(c *Config) { c.ClientCIDRs = nil }),
			want:   []string{"http_access deny all", "http_access deny manager"},
			absent: []string{"http_access deny !ep_clients"},
		},
		"NoConnectPortsDeniesConnect": {
			reason: "No CONNECT ports means no CONNECT at all.",
			c:      typical(func(c *Config) { c.ConnectPorts = nil }),
			want:   []string{"http_access deny !ep_authed", "http_access deny ep_connect"},
			absent: []string{"http_access deny ep_connect !ep_connect_ports"},
		},
		"NoDestinationsAllowsNothing": {
			reason: "No destinations means no allow rule at all.",
			c:      typical(func(c *Config) { c.Destinations = nil }),
			want:   []string{"http_access deny !ep_authed", "http_access deny all"},
			absent: []string{"http_access allow ep_dst_names", "http_access allow ep_dst_nets"},
		},
		"PortsSortedAndDeduplicated": {
			reason: "CONNECT ports are sorted and deduplicated.",
			c:      typical(func(c *Config) { c.ConnectPorts = []int32{8443, 443, 8443, 1} }),
			want:   []string{"acl ep_connect_ports port 1", "acl ep_connect_ports port 443", "acl ep_connect_ports port 8443"},
		},
		"HostPaths": {
			reason: "Test and host paths replace the production defaults.",
			c: typical(func(c *Config) {
				c.ListenAddress = "::1"
				c.Port = 65535
				c.HtpasswdPath = "/tmp/x/htpasswd"
				c.PIDFile = "none"
				c.CacheLog = "/dev/stderr"
				c.AccessLog = "/dev/stdout"
				c.CoredumpDir = "/tmp/x"
				c.HostsFile = "/tmp/x/hosts"
			}),
			want: []string{
				"http_port [::1]:65535",
				"pid_filename none",
				"cache_log /dev/stderr",
				"coredump_dir /tmp/x",
				"access_log stdio:/dev/stdout logformat=egressproxy_json",
				"hosts_file /tmp/x/hosts",
				"auth_param basic program /usr/lib/squid/basic_ncsa_auth /tmp/x/htpasswd",
			},
		},
		"AccessLogSyslog": {
			reason: "A syslog facility adds a second access log in the same format; the file log stays.",
			c:      typical(func(c *Config) { c.AccessLogSyslog = "local4.info" }),
			want: []string{
				"logformat egressproxy_json " + logFormat,
				"access_log stdio:/var/log/squid/access.log logformat=egressproxy_json",
				"access_log syslog:local4.info logformat=egressproxy_json",
			},
		},
		"NoAccessLogSyslog": {
			reason: "Without a facility there is no syslog log.",
			c:      typical(),
			absent: []string{"access_log syslog:local4.info logformat=egressproxy_json"},
		},
		"ShutdownLifetimeDefault": {
			reason: "Zero keeps 10 seconds.",
			c:      typical(),
			want:   []string{"max_filedescriptors 65536", "shutdown_lifetime 10 seconds"},
		},
		"ShutdownLifetimeRoundsUp": {
			reason: "squid counts whole seconds; a fraction rounds up.",
			c:      typical(func(c *Config) { c.ShutdownLifetime = 29500 * time.Millisecond }),
			want:   []string{"shutdown_lifetime 30 seconds"},
		},
	}
}

func TestRender(t *testing.T) {
	for name, tc := range renderCases() {
		t.Run(name, func(t *testing.T) {
			got, err := Render(tc.c)
			if err != nil {
				t.Fatalf("\n%s\nRender(...): unexpected error: %v", tc.reason, err)
			}
			lines := strings.Split(string(got), "\n")
			if missing := inOrder(lines, tc.want); missing != "" {
				t.Errorf("\n%s\nRender(...): missing (or out of order) line %q in:\n%s", tc.reason, missing, got)
			}
			for _, a := range tc.absent {
				if slices.Contains(lines, a) {
					t.Errorf("\n%s\nRender(...): unexpected line %q", tc.reason, a)
				}
			}
		})
	}
}

// inOrder returns the first of want that does not follow its predecessor in
// lines, or "" when they all do.
func inOrder(lines, want []string) string {
	i := 0
	for _, w := range want {
		j := slices.Index(lines[i:], w)
		if j < 0 {
			return w
		}
		i += j + 1
	}
	return ""
}

// TestRenderGolden pins the whole file for a typical config, so a review sees
// every change to it. Run with -update to rewrite testdata/typical.conf.
func TestRenderGolden(t *testing.T) {
	got, err := Render(typical(func(c *Config) { c.DenyPrivateDestinations = true }))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "typical.conf")
	if *update {
		if err := os.WriteFile(golden, got, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden) //nolint:gosec // A fixed test fixture.
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("Render(typical): -want, +got (run go test -update to accept):\n%s", diff)
	}
}

func TestRenderDeterministic(t *testing.T) {
	a := typical(func(c *Config) {
		c.ClientCIDRs = []string{"10.0.0.0/8", "172.16.0.0/12", "::1", "127.0.0.1"}
		c.Destinations = []string{"b.example", ".a.example", "192.0.2.0/24", "2001:db8::/32", "c.example"}
		c.ConnectPorts = []int32{443, 8443, 563}
	})
	b := a
	b.ClientCIDRs = slices.Clone(a.ClientCIDRs)
	b.Destinations = slices.Clone(a.Destinations)
	b.ConnectPorts = slices.Clone(a.ConnectPorts)
	slices.Reverse(b.ClientCIDRs)
	slices.Reverse(b.Destinations)
	slices.Reverse(b.ConnectPorts)
	b.Destinations = append(b.Destinations, "C.Example", "x.a.example")

	ra, errA := Render(a)
	rb, errB := Render(b)
	if errA != nil || errB != nil {
		t.Fatalf("Render(...): %v, %v", errA, errB)
	}
	if !bytes.Equal(ra, rb) || Checksum(ra) != Checksum(rb) {
		t.Errorf("Render(...): order, case and covered duplicates changed the output:\n%s", cmp.Diff(string(ra), string(rb)))
	}
	ra2, _ := Render(a)
	if !bytes.Equal(ra, ra2) {
		t.Error("Render(...): two renders of the same Config differ")
	}
}

// TestPrivateRanges checks the ranges DenyPrivateDestinations refuses against
// addresses from the IANA special-purpose registries (RFC 6890 and updates)
// and public ones: squid must see canonical, non-overlapping prefixes, cover
// every special address, and leave public addresses and squid's own form of
// IPv4 (::ffff:0:0/96) alone.
func TestPrivateRanges(t *testing.T) {
	var ranges []netip.Prefix
	for _, r := range privateRanges() {
		p, err := netip.ParsePrefix(r)
		if err != nil || p.Masked().String() != r {
			t.Fatalf("privateRanges: %q is not a canonical CIDR", r)
		}
		for _, q := range ranges {
			if q.Overlaps(p) {
				t.Errorf("privateRanges: %s overlaps %s, which squid warns about", p, q)
			}
		}
		ranges = append(ranges, p)
	}
	covered := func(a netip.Addr) bool {
		return slices.ContainsFunc(ranges, func(p netip.Prefix) bool { return p.Contains(a) })
	}
	cases := map[string]struct {
		reason string
		addrs  []string
		want   bool
	}{
		"SpecialIPv4": {
			reason: "Every IPv4 special-purpose range that is not globally reachable is denied.",
			addrs: []string{
				"0.0.0.0", "10.1.2.3", "100.64.0.1", "127.0.0.1", "169.254.169.254", "172.31.255.255",
				"192.0.0.8", "192.0.2.1", "192.88.99.1", "192.168.1.1", "198.18.0.1", "198.19.255.255",
				"198.51.100.1", "203.0.113.1", "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255",
			},
			want: true,
		},
		"SpecialIPv6": {
			reason: "IPv6 loopback, unspecified, IPv4-compatible, NAT64, 6to4, Teredo, documentation, ULA, link-local, site-local and multicast are denied.",
			addrs: []string{
				"::", "::1", "::a9fe:a9fe", "64:ff9b::a9fe:a9fe", "64:ff9b:1::1", "100::1", "2001::1",
				"2001:db8::1", "2002:a9fe:a9fe::1", "3fff::1", "5f00::1", "fd20:ce::254", "fe80::1", "fec0::1", "ff02::1",
			},
			want: true,
		},
		"Public": {
			reason: "Public addresses, and IPv4 in squid's mapped form, are not denied by this list.",
			addrs:  []string{"8.8.8.8", "1.1.1.1", "192.0.1.1", "198.20.0.1", "2001:4860:4860::8888", "2a00:1450::1", "::ffff:8.8.8.8"},
			want:   false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, a := range tc.addrs {
				if got := covered(netip.MustParseAddr(a)); got != tc.want {
					t.Errorf("\n%s\n%s denied: %t, want %t", tc.reason, a, got, tc.want)
				}
			}
		})
	}
}
