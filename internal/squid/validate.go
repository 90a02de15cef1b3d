/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
)

const (
	errFmtPort     = "%s: %d is not a TCP port (1..65535)"
	errFmtTooMany  = "%s: %d entries, at most %d are allowed"
	errFmtValue    = "%s: %q: %s"
	maxQuoted      = 64
	maxHostnameLen = 253
	maxLabelLen    = 63
	// maxAddrLen fits the longest IPv6 CIDR (45 bytes) with room to spare.
	maxAddrLen = 50
)

// Reasons a single value is refused. They complete errFmtValue.
const (
	reasonEmpty       = "must not be empty"
	reasonTooLong     = "is too long"
	reasonChar        = "contains a forbidden character (allowed: letters, digits and . - : /)"
	reasonPathChar    = "contains a forbidden character (allowed: letters, digits and . _ - /)"
	reasonNotAbs      = "must be an absolute, clean path"
	reasonNotCIDR     = "is not an IP address or CIDR"
	reasonZone        = "must not carry an IPv6 zone"
	reasonMapped      = "is an IPv4-mapped IPv6 address; use the IPv4 form"
	reasonHostBits    = "has host bits set; use the network address (%s)"
	reasonWildcard    = "wildcards are written as a leading dot (.example.com matches example.com and its subdomains)"
	reasonTrailingDot = "must not end with a dot"
	reasonLabel       = "label %q is not an RFC 1123 label (1-63 letters, digits or '-', not starting or ending with '-')"
	reasonNumericTLD  = "ends in a numeric label, which resolvers read as an IP address"
	reasonSyslog      = "must be local0..local7 or daemon, a dot, and info or notice"
)

// syslogFacility is what AccessLogSyslog may be: a facility a platform can
// route and a priority journald keeps by default.
var syslogFacility = regexp.MustCompile(`^(local[0-7]|daemon)\.(info|notice)$`)

// MaxShutdownLifetime bounds Config.ShutdownLifetime: squid keeps its port
// closed and the instance busy for that long when it stops.
const MaxShutdownLifetime = 10 * time.Minute

const errFmtShutdownLifetime = "shutdownLifetime: %s is not between 0 and %s"

// validate checks every field of c and returns its normalised form. Each
// error names the offending field, and the index for a list.
func validate(c Config) (spec, error) {
	s := spec{port: c.Port, denyPrivate: c.DenyPrivateDestinations, shutdownLifetime: defaultShutdownLifetime}
	if c.Port < 1 || c.Port > 65535 {
		return spec{}, fmt.Errorf(errFmtPort, "port", c.Port)
	}
	if c.AccessLogSyslog != "" {
		if !syslogFacility.MatchString(c.AccessLogSyslog) {
			return spec{}, valueError("accessLogSyslog", c.AccessLogSyslog, reasonSyslog)
		}
		s.accessLogSyslog = c.AccessLogSyslog
	}
	switch {
	case c.ShutdownLifetime < 0 || c.ShutdownLifetime > MaxShutdownLifetime:
		return spec{}, fmt.Errorf(errFmtShutdownLifetime, c.ShutdownLifetime, MaxShutdownLifetime)
	case c.ShutdownLifetime > 0:
		// squid counts whole seconds; round up so a tunnel gets at least
		// what was asked for.
		s.shutdownLifetime = int((c.ShutdownLifetime + time.Second - 1) / time.Second)
	}
	if c.ListenAddress != "" {
		a, err := parseAddr("listenAddress", c.ListenAddress)
		if err != nil {
			return spec{}, err
		}
		s.listen = a
	}
	var err error
	if s.clients, err = parsePrefixes("clientCIDRs", c.ClientCIDRs, MaxClientCIDRs); err != nil {
		return spec{}, err
	}
	if s.names, s.nets, err = parseDestinations(c.Destinations); err != nil {
		return spec{}, err
	}
	if s.connectPorts, err = parsePorts("connectPorts", c.ConnectPorts, MaxConnectPorts); err != nil {
		return spec{}, err
	}
	if s.httpPorts, err = parsePorts("httpPorts", c.HTTPPorts, MaxHTTPPorts); err != nil {
		return spec{}, err
	}
	paths := []struct {
		field, value, def string
		dest              *string
	}{
		{"htpasswdPath", c.HtpasswdPath, DefaultHtpasswdPath, &s.htpasswd},
		{"pidFile", c.PIDFile, DefaultPIDFile, &s.pidFile},
		{"cacheLog", c.CacheLog, DefaultCacheLog, &s.cacheLog},
		{"accessLog", c.AccessLog, DefaultAccessLog, &s.accessLog},
		{"coredumpDir", c.CoredumpDir, DefaultCoredumpDir, &s.coredumpDir},
		{"authHelper", c.AuthHelper, DefaultAuthHelper, &s.authHelper},
		{"hostsFile", c.HostsFile, "", &s.hostsFile},
	}
	for _, p := range paths {
		v := withDefault(p.value, p.def)
		if v == "" || (p.field == "pidFile" && v == "none") {
			*p.dest = v
			continue
		}
		if r := checkPath(v); r != "" {
			return spec{}, valueError(p.field, v, r)
		}
		*p.dest = v
	}
	return s, nil
}

// valueError names the field and quotes a bounded prefix of the value, so a
// hostile megabyte-long value does not end up in a condition message.
func valueError(field, v, reason string) error {
	if len(v) > maxQuoted {
		v = v[:maxQuoted] + "..."
	}
	return fmt.Errorf(errFmtValue, field, v, reason)
}

func index(field string, i int) string { return fmt.Sprintf("%s[%d]", field, i) }

func parsePorts(field string, ports []int32, limit int) ([]int32, error) {
	if len(ports) > limit {
		return nil, fmt.Errorf(errFmtTooMany, field, len(ports), limit)
	}
	out := make([]int32, 0, len(ports))
	for i, p := range ports {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf(errFmtPort, index(field, i), p)
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func parsePrefixes(field string, vs []string, limit int) ([]netip.Prefix, error) {
	if len(vs) > limit {
		return nil, fmt.Errorf(errFmtTooMany, field, len(vs), limit)
	}
	out := make([]netip.Prefix, 0, len(vs))
	for i, v := range vs {
		p, err := parsePrefix(index(field, i), v)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return minimalPrefixes(out), nil
}

func parseDestinations(vs []string) ([]string, []netip.Prefix, error) {
	if len(vs) > MaxDestinations {
		return nil, nil, fmt.Errorf(errFmtTooMany, "destinations", len(vs), MaxDestinations)
	}
	var names []string
	var nets []netip.Prefix
	for i, v := range vs {
		field := index("destinations", i)
		if looksLikeIP(v) {
			p, err := parsePrefix(field, v)
			if err != nil {
				return nil, nil, err
			}
			nets = append(nets, p)
			continue
		}
		n, err := parseHostname(field, v)
		if err != nil {
			return nil, nil, err
		}
		names = append(names, n)
	}
	return minimalNames(names), minimalPrefixes(nets), nil
}

// looksLikeIP tells CIDRs and addresses from hostnames: a hostname never
// contains ':' or '/', and one that parses as an address is an address.
func looksLikeIP(v string) bool {
	if strings.ContainsAny(v, ":/") {
		return true
	}
	_, err := netip.ParseAddr(v)
	return err == nil
}

func parseAddr(field, v string) (netip.Addr, error) {
	if r := checkChars(v, maxAddrLen); r != "" {
		return netip.Addr{}, valueError(field, v, r)
	}
	a, r := addr(v)
	if r != "" {
		return netip.Addr{}, valueError(field, v, r)
	}
	return a, nil
}

func addr(v string) (netip.Addr, string) {
	a, err := netip.ParseAddr(v)
	switch {
	case err != nil:
		return netip.Addr{}, reasonNotCIDR
	case a.Zone() != "":
		return netip.Addr{}, reasonZone
	case a.Is4In6():
		return netip.Addr{}, reasonMapped
	}
	return a, ""
}

// parsePrefix accepts a CIDR in canonical form, or a single address, which
// stands for a host prefix (/32 or /128).
func parsePrefix(field, v string) (netip.Prefix, error) {
	if r := checkChars(v, maxAddrLen); r != "" {
		return netip.Prefix{}, valueError(field, v, r)
	}
	as, bits, found := strings.Cut(v, "/")
	a, r := addr(as)
	if r != "" {
		return netip.Prefix{}, valueError(field, v, r)
	}
	if !found {
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(a.String() + "/" + bits)
	if err != nil {
		return netip.Prefix{}, valueError(field, v, reasonNotCIDR)
	}
	if p.Masked() != p {
		return netip.Prefix{}, valueError(field, v, fmt.Sprintf(reasonHostBits, p.Masked()))
	}
	return p, nil
}

// parseHostname accepts an RFC 1123 hostname, optionally with a leading dot
// that makes it a suffix match, and returns it in lower case.
func parseHostname(field, v string) (string, error) {
	if strings.HasPrefix(v, "*") {
		return "", valueError(field, v, reasonWildcard)
	}
	if r := checkChars(v, maxHostnameLen+1); r != "" {
		return "", valueError(field, v, r)
	}
	if strings.HasSuffix(v, ".") {
		return "", valueError(field, v, reasonTrailingDot)
	}
	bare := strings.TrimPrefix(v, ".")
	if len(bare) > maxHostnameLen {
		return "", valueError(field, v, reasonTooLong)
	}
	labels := strings.Split(bare, ".")
	for _, l := range labels {
		if !isLabel(l) {
			return "", valueError(field, v, fmt.Sprintf(reasonLabel, l))
		}
	}
	if endsInNumber(labels[len(labels)-1]) {
		return "", valueError(field, v, reasonNumericTLD)
	}
	return strings.ToLower(v), nil
}

// endsInNumber reports whether the last label of a name is a number in
// decimal, octal or hex (0x): resolvers (inet_aton), curl and browsers read
// such a name as an IPv4 address (0x08080808, 134744072, 127.1, 010.0.0.1),
// which a name in the allowlist would let past the checks of addresses.
// It is the WHATWG URL host parser's test.
func endsInNumber(label string) bool {
	l := strings.ToLower(label)
	if h, ok := strings.CutPrefix(l, "0x"); ok {
		return strings.Trim(h, "0123456789abcdef") == ""
	}
	return strings.Trim(l, "0123456789") == ""
}

func isLabel(l string) bool {
	if l == "" || len(l) > maxLabelLen || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !isAlnum(c) && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// checkChars is the first line of defence against injection: a value that
// passes it has no whitespace, quote, '#', '%', '$' or control byte, so it
// cannot end a squid line, start a comment or expand a macro.
func checkChars(v string, maxLen int) string {
	switch {
	case v == "":
		return reasonEmpty
	case len(v) > maxLen:
		return reasonTooLong
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !isAlnum(c) && !strings.ContainsRune(".-:/", rune(c)) {
			return reasonChar
		}
	}
	return ""
}

func checkPath(v string) string {
	if len(v) > MaxPathLength {
		return reasonTooLong
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !isAlnum(c) && !strings.ContainsRune("._-/", rune(c)) {
			return reasonPathChar
		}
	}
	if !path.IsAbs(v) || path.Clean(v) != v {
		return reasonNotAbs
	}
	return ""
}
