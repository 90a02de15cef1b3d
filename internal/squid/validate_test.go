/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// equateErrors is crossplane-runtime's test.EquateErrors (same type and same
// message), kept here because that package pulls client-go into this
// package's test and fuzz binaries.
func equateErrors() cmp.Option {
	return cmp.Comparer(func(a, b error) bool {
		if a == nil || b == nil {
			return a == nil && b == nil
		}
		return reflect.TypeOf(a) == reflect.TypeOf(b) && a.Error() == b.Error()
	})
}

func TestRenderValidation(t *testing.T) {
	long := strings.Repeat("a", 70)
	longLabel := strings.Repeat("a", 64)
	longName := strings.Repeat("abcdefghi.", 26) + "com" // 263 bytes
	many := func(n int, v string) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = v
		}
		return s
	}
	manyPorts := make([]int32, MaxConnectPorts+1)
	for i := range manyPorts {
		manyPorts[i] = 443
	}
	dest := func(v string) Config {
		return typical(func(c *Config) { c.Destinations = []string{"a.example", "b.example", "c.example", v} })
	}
	cases := map[string]struct {
		reason string
		c      Config
		want   error
	}{
		"PortZero":            {"Port must be set.", typical(func(c *Config) { c.Port = 0 }), errors.New("port: 0 is not a TCP port (1..65535)")},
		"PortTooHigh":         {"Port must fit in 16 bits.", typical(func(c *Config) { c.Port = 65536 }), errors.New("port: 65536 is not a TCP port (1..65535)")},
		"PortNegative":        {"Port must be positive.", typical(func(c *Config) { c.Port = -1 }), errors.New("port: -1 is not a TCP port (1..65535)")},
		"ListenNotAddress":    {"ListenAddress must be an address.", typical(func(c *Config) { c.ListenAddress = "localhost" }), errors.New(`listenAddress: "localhost": is not an IP address or CIDR`)},
		"ListenZone":          {"An IPv6 zone would need a '%'.", typical(func(c *Config) { c.ListenAddress = "fe80::1%eth0" }), errors.New(`listenAddress: "fe80::1%eth0": contains a forbidden character (allowed: letters, digits and . - : /)`)},
		"ListenMapped":        {"IPv4-mapped addresses are ambiguous.", typical(func(c *Config) { c.ListenAddress = "::ffff:127.0.0.1" }), errors.New(`listenAddress: "::ffff:127.0.0.1": is an IPv4-mapped IPv6 address; use the IPv4 form`)},
		"ClientNotCIDR":       {"Client CIDRs must parse.", typical(func(c *Config) { c.ClientCIDRs = []string{"10.0.0.0/8", "10.0.0.0/33"} }), errors.New(`clientCIDRs[1]: "10.0.0.0/33": is not an IP address or CIDR`)},
		"ClientHostBits":      {"A CIDR with host bits is probably a typo.", typical(func(c *Config) { c.ClientCIDRs = []string{"10.0.0.1/8"} }), errors.New(`clientCIDRs[0]: "10.0.0.1/8": has host bits set; use the network address (10.0.0.0/8)`)},
		"ClientEmpty":         {"An empty entry is refused.", typical(func(c *Config) { c.ClientCIDRs = []string{""} }), errors.New(`clientCIDRs[0]: "": must not be empty`)},
		"ClientNewline":       {"A newline cannot sneak into an acl line.", typical(func(c *Config) { c.ClientCIDRs = []string{"10.0.0.0/8\nhttp_access allow all"} }), errors.New(`clientCIDRs[0]: "10.0.0.0/8\nhttp_access allow all": contains a forbidden character (allowed: letters, digits and . - : /)`)},
		"ClientTooMany":       {"The list size is bounded.", typical(func(c *Config) { c.ClientCIDRs = many(MaxClientCIDRs+1, "10.0.0.0/8") }), errors.New("clientCIDRs: 257 entries, at most 256 are allowed")},
		"DestNewline":         {"A newline cannot add a directive.", dest("a.example\nhttp_access allow all"), errors.New(`destinations[3]: "a.example\nhttp_access allow all": contains a forbidden character (allowed: letters, digits and . - : /)`)},
		"DestCR":              {"A carriage return is a line end too.", dest("a.example\r"), errors.New(`destinations[3]: "a.example\r": contains a forbidden character (allowed: letters, digits and . - : /)`)},
		"DestSpace":           {"A space would add an ACL value.", dest("a.example all"), errors.New(`destinations[3]: "a.example all": contains a forbidden character (allowed: letters, digits and . - : /)`)},
		"DestTab":             {"A tab separates squid tokens too.", dest("a.example\tall"), errors.New(`destinations[3]: "a.example\tall": contains a forbidden character (allowed: letters, digits and . - : /)`)},
		"DestHash":            {"'#' is refused.", dest("a#b.example"), errors.New(`destinations[3]: "a#b.example": contains a forbidden character (allowed: letters, digits and . - : /)`)},
		"DestQuote":           {"Quotes are refused.", dest(`"a.example"`), errors.New(`destinations[3]: "\"a.example\"": contains a forbidden character (allowed: letters, digits and . - : /)`)},
		"DestNUL":             {"Control bytes are refused.", dest("a\x00.example"), errors.New(`destinations[3]: "a\x00.example": contains a forbidden character (allowed: letters, digits and . - : /)`)},
		"DestUnicode":         {"Non-ASCII names must be given in punycode.", dest("bücher.example"), errors.New(`destinations[3]: "bücher.example": contains a forbidden character (allowed: letters, digits and . - : /)`)},
		"DestMacro":           {"squid macros are refused.", dest("${service_name}.example"), errors.New(`destinations[3]: "${service_name}.example": contains a forbidden character (allowed: letters, digits and . - : /)`)},
		"DestUnderscore":      {"Underscores are not RFC 1123.", dest("a_b.example"), errors.New(`destinations[3]: "a_b.example": contains a forbidden character (allowed: letters, digits and . - : /)`)},
		"DestComma":           {"A comma is no list separator here.", dest("a.example,b.example"), errors.New(`destinations[3]: "a.example,b.example": contains a forbidden character (allowed: letters, digits and . - : /)`)},
		"DestEmpty":           {"An empty entry is refused.", dest(""), errors.New(`destinations[3]: "": must not be empty`)},
		"DestStarWildcard":    {"Wildcards use a leading dot.", dest("*.example.com"), errors.New(`destinations[3]: "*.example.com": wildcards are written as a leading dot (.example.com matches example.com and its subdomains)`)},
		"DestTrailingDot":     {"A trailing dot would never match.", dest("a.example."), errors.New(`destinations[3]: "a.example.": must not end with a dot`)},
		"DestDotOnly":         {"A lone dot is no suffix.", dest("."), errors.New(`destinations[3]: ".": must not end with a dot`)},
		"DestEmptyLabel":      {"Labels must not be empty.", dest("a..example"), errors.New(`destinations[3]: "a..example": label "" is not an RFC 1123 label (1-63 letters, digits or '-', not starting or ending with '-')`)},
		"DestLeadingHyphen":   {"Labels do not start with '-'.", dest("-a.example"), errors.New(`destinations[3]: "-a.example": label "-a" is not an RFC 1123 label (1-63 letters, digits or '-', not starting or ending with '-')`)},
		"DestTrailingHyphen":  {"Labels do not end with '-'.", dest(".a-.example"), errors.New(`destinations[3]: ".a-.example": label "a-" is not an RFC 1123 label (1-63 letters, digits or '-', not starting or ending with '-')`)},
		"DestLabelTooLong":    {"Labels are at most 63 bytes.", dest(longLabel + ".example"), errors.New(`destinations[3]: "` + longLabel[:64] + `...": label "` + longLabel + `" is not an RFC 1123 label (1-63 letters, digits or '-', not starting or ending with '-')`)},
		"DestNameTooLong":     {"Names are at most 253 bytes.", dest(longName), errors.New(`destinations[3]: "` + longName[:64] + `...": is too long`)},
		"DestNumericTLD":      {"A malformed address is not a name.", dest("1.2.3.400"), errors.New(`destinations[3]: "1.2.3.400": ends in a numeric label, which resolvers read as an IP address`)},
		"DestHexAddress":      {"0x08080808 is 8.8.8.8 to inet_aton, not a name.", dest("0x08080808"), errors.New(`destinations[3]: "0x08080808": ends in a numeric label, which resolvers read as an IP address`)},
		"DestHexUpper":        {"Hex digits in either case.", dest("0X7F000001"), errors.New(`destinations[3]: "0X7F000001": ends in a numeric label, which resolvers read as an IP address`)},
		"DestHexLastLabel":    {"0x7f.0x1 is 127.0.0.1.", dest("0x7f.0x1"), errors.New(`destinations[3]: "0x7f.0x1": ends in a numeric label, which resolvers read as an IP address`)},
		"DestDecimalAddress":  {"134744072 is 8.8.8.8.", dest("134744072"), errors.New(`destinations[3]: "134744072": ends in a numeric label, which resolvers read as an IP address`)},
		"DestShortAddress":    {"127.1 is 127.0.0.1.", dest("127.1"), errors.New(`destinations[3]: "127.1": ends in a numeric label, which resolvers read as an IP address`)},
		"DestOctalAddress":    {"010.0.0.1 is 8.0.0.1, and Go refuses its leading zero.", dest("010.0.0.1"), errors.New(`destinations[3]: "010.0.0.1": ends in a numeric label, which resolvers read as an IP address`)},
		"DestBadCIDR":         {"CIDRs must parse.", dest("10.0.0.0/40"), errors.New(`destinations[3]: "10.0.0.0/40": is not an IP address or CIDR`)},
		"DestBadIPv6":         {"IPv6 addresses must parse.", dest("2001:db8::zz"), errors.New(`destinations[3]: "2001:db8::zz": is not an IP address or CIDR`)},
		"DestHostBits":        {"A CIDR with host bits is refused.", dest("2001:db8::1/32"), errors.New(`destinations[3]: "2001:db8::1/32": has host bits set; use the network address (2001:db8::/32)`)},
		"DestMapped":          {"IPv4-mapped CIDRs are refused.", dest("::ffff:10.0.0.0/104"), errors.New(`destinations[3]: "::ffff:10.0.0.0/104": is an IPv4-mapped IPv6 address; use the IPv4 form`)},
		"DestTooMany":         {"The list size is bounded.", typical(func(c *Config) { c.Destinations = many(MaxDestinations+1, "a.example") }), errors.New("destinations: 513 entries, at most 512 are allowed")},
		"ConnectPortZero":     {"CONNECT ports must be real ports.", typical(func(c *Config) { c.ConnectPorts = []int32{443, 0} }), errors.New("connectPorts[1]: 0 is not a TCP port (1..65535)")},
		"ConnectPortTooHigh":  {"CONNECT ports fit in 16 bits.", typical(func(c *Config) { c.ConnectPorts = []int32{70000} }), errors.New("connectPorts[0]: 70000 is not a TCP port (1..65535)")},
		"ConnectPortsTooMany": {"The list size is bounded.", typical(func(c *Config) { c.ConnectPorts = manyPorts }), errors.New("connectPorts: 33 entries, at most 32 are allowed")},
		"HTTPPortZero":        {"HTTP ports must be real ports.", typical(func(c *Config) { c.HTTPPorts = []int32{80, 0} }), errors.New("httpPorts[1]: 0 is not a TCP port (1..65535)")},
		"HTTPPortTooHigh":     {"HTTP ports fit in 16 bits.", typical(func(c *Config) { c.HTTPPorts = []int32{65536} }), errors.New("httpPorts[0]: 65536 is not a TCP port (1..65535)")},
		"HTTPPortsTooMany":    {"The list size is bounded.", typical(func(c *Config) { c.HTTPPorts = manyPorts }), errors.New("httpPorts: 33 entries, at most 32 are allowed")},
		"HtpasswdRelative":    {"Paths are absolute.", typical(func(c *Config) { c.HtpasswdPath = "etc/htpasswd" }), errors.New(`htpasswdPath: "etc/htpasswd": must be an absolute, clean path`)},
		"HtpasswdDotDot":      {"Paths are clean.", typical(func(c *Config) { c.HtpasswdPath = "/etc/../htpasswd" }), errors.New(`htpasswdPath: "/etc/../htpasswd": must be an absolute, clean path`)},
		"HtpasswdSpace":       {"A space would add an argument to the helper.", typical(func(c *Config) { c.HtpasswdPath = "/etc/htpasswd /etc/shadow" }), errors.New(`htpasswdPath: "/etc/htpasswd /etc/shadow": contains a forbidden character (allowed: letters, digits and . _ - /)`)},
		"AccessLogNewline":    {"A newline in a path cannot add a directive.", typical(func(c *Config) { c.AccessLog = "/dev/stdout\nhttp_access allow all" }), errors.New(`accessLog: "/dev/stdout\nhttp_access allow all": contains a forbidden character (allowed: letters, digits and . _ - /)`)},
		"PIDFileQuote":        {"Quotes are refused in paths.", typical(func(c *Config) { c.PIDFile = `/run/"squid".pid` }), errors.New(`pidFile: "/run/\"squid\".pid": contains a forbidden character (allowed: letters, digits and . _ - /)`)},
		"CacheLogHash":        {"'#' is refused in paths.", typical(func(c *Config) { c.CacheLog = "/var/log/#cache.log" }), errors.New(`cacheLog: "/var/log/#cache.log": contains a forbidden character (allowed: letters, digits and . _ - /)`)},
		"CoredumpDirTooLong":  {"Paths are bounded.", typical(func(c *Config) { c.CoredumpDir = "/" + strings.Repeat(long, 4) }), errors.New(`coredumpDir: "/` + long[:63] + `...": is too long`)},
		"AuthHelperMacro":     {"Macros are refused in paths.", typical(func(c *Config) { c.AuthHelper = "/usr/lib/${x}" }), errors.New(`authHelper: "/usr/lib/${x}": contains a forbidden character (allowed: letters, digits and . _ - /)`)},
		"SyslogFacility":      {"Only local0..7 and daemon.", typical(func(c *Config) { c.AccessLogSyslog = "auth.info" }), errors.New(`accessLogSyslog: "auth.info": must be local0..local7 or daemon, a dot, and info or notice`)},
		"SyslogPriority":      {"Only info and notice, which journald keeps.", typical(func(c *Config) { c.AccessLogSyslog = "local4.debug" }), errors.New(`accessLogSyslog: "local4.debug": must be local0..local7 or daemon, a dot, and info or notice`)},
		"SyslogInjection":     {"Nothing can follow the priority.", typical(func(c *Config) { c.AccessLogSyslog = "local4.info logformat=squid" }), errors.New(`accessLogSyslog: "local4.info logformat=squid": must be local0..local7 or daemon, a dot, and info or notice`)},
		"SyslogNewline":       {"A newline cannot add a directive.", typical(func(c *Config) { c.AccessLogSyslog = "local4.info\nhttp_access allow all" }), errors.New(`accessLogSyslog: "local4.info\nhttp_access allow all": must be local0..local7 or daemon, a dot, and info or notice`)},
		"ShutdownNegative":    {"A lifetime is not negative.", typical(func(c *Config) { c.ShutdownLifetime = -time.Second }), errors.New("shutdownLifetime: -1s is not between 0 and 10m0s")},
		"ShutdownTooLong":     {"A stopping squid does not hold on for ever.", typical(func(c *Config) { c.ShutdownLifetime = time.Hour }), errors.New("shutdownLifetime: 1h0m0s is not between 0 and 10m0s")},
		"HostsFileRelative":   {"The hosts file path is absolute.", typical(func(c *Config) { c.HostsFile = "hosts" }), errors.New(`hostsFile: "hosts": must be an absolute, clean path`)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Render(tc.c)
			if diff := cmp.Diff(tc.want, err, equateErrors()); diff != "" {
				t.Errorf("\n%s\nRender(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if got != nil {
				t.Errorf("\n%s\nRender(...): returned a config with an error", tc.reason)
			}
		})
	}
}
