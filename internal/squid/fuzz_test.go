/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fuzzConfig builds a Config from fuzzer primitives. Lists are split on ','
// (which Render refuses inside a value anyway); ports come three bytes at a
// time so they also go out of range.
func fuzzConfig(port int32, listen, clients, dests string, ports, httpPorts []byte, deny bool, paths string) Config {
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	c := Config{Port: port, ListenAddress: listen, ClientCIDRs: split(clients), Destinations: split(dests), DenyPrivateDestinations: deny}
	threeBytes := func(b []byte) []int32 {
		var out []int32
		for i := 0; i+2 < len(b); i += 3 {
			out = append(out, int32(b[i])<<16|int32(b[i+1])<<8|int32(b[i+2]))
		}
		return out
	}
	c.ConnectPorts, c.HTTPPorts = threeBytes(ports), threeBytes(httpPorts)
	p := append(split(paths), make([]string, 7)...)
	c.HtpasswdPath, c.PIDFile, c.CacheLog, c.AccessLog, c.CoredumpDir, c.AuthHelper, c.HostsFile = p[0], p[1], p[2], p[3], p[4], p[5], p[6]
	return c
}

// FuzzRender checks that whatever the input, Render either fails or returns
// a config made only of the lines it means to write: every line is a known
// comment, a known constant directive, or a variable directive with exactly
// its expected fields, each of which parses back as what it claims to be.
func FuzzRender(f *testing.F) {
	web := []byte{0, 0, 80, 0, 1, 187}
	f.Add(int32(3128), "", "10.0.0.0/8", "api.github.com,.googleapis.com,203.0.113.0/24", []byte{0, 1, 187}, web, true, "")
	f.Add(int32(1), "::1", "::1,127.0.0.1", "a.example\nhttp_access allow all", []byte{}, []byte{}, false, "/tmp/a,none,/dev/stderr,/dev/stdout,/tmp,/bin/true,/etc/hosts")
	f.Add(int32(65535), "127.0.0.1", "10.0.0.1/8", "x.example y", []byte{1, 0, 0}, []byte{1, 0, 0}, false, "/a b")
	f.Add(int32(0), "fe80::1%eth0", "", "*.example.com,.example.com,example.com", []byte{0, 0, 0}, []byte{0, 0, 0}, true, "/x\n#")
	f.Add(int32(8080), "", "0.0.0.0/0,::/0", "${x},\"q\",#c,%20,a\tb", []byte{0, 1, 187, 0, 32, 251}, web, true, "relative")
	// Valid but for one hostile path, so the path checks are reached.
	f.Add(int32(3128), "", "10.0.0.0/8", "a.example", []byte{0, 1, 187}, web, false, "/x\nhttp_access allow all")
	f.Add(int32(3128), "", "10.0.0.0/8", "a.example", []byte{0, 1, 187}, web, true, ",,,,,,/etc/hosts #x")
	// The metadata server allowlisted every way, which must change nothing.
	f.Add(int32(3128), "", "10.0.0.0/8", "169.254.169.254,fd20:ce::254,metadata.google.internal,.internal", []byte{0, 1, 187}, web, false, "")
	ck := newChecker(f)
	f.Fuzz(func(t *testing.T, port int32, listen, clients, dests string, ports, httpPorts []byte, deny bool, paths string) {
		c := fuzzConfig(port, listen, clients, dests, ports, httpPorts, deny, paths)
		conf, err := Render(c)
		if err != nil {
			if conf != nil {
				t.Fatalf("Render returned a config and an error: %v", err)
			}
			return
		}
		if msg := ck.check(string(conf), c); msg != "" {
			t.Fatalf("%s\ninput: %#v\nconfig:\n%s", msg, c, conf)
		}
	})
}

// checker knows the lines Render may write.
type checker struct {
	// known are the lines that carry no input.
	known map[string]bool
	// variable maps each directive that carries input to its field count.
	variable map[string]int
	// aclTypes maps each ACL that carries input to its type.
	aclTypes map[string]string
}

// newChecker renders configs that switch on every optional part and collects
// their lines that carry no input.
func newChecker(f *testing.F) checker {
	ck := checker{
		known: map[string]bool{"": true},
		variable: map[string]int{
			"http_port": 2, "pid_filename": 2, "cache_log": 2, "coredump_dir": 2, "hosts_file": 2,
			"access_log": 3, "auth_param": 5, "acl": 4,
		},
		aclTypes: map[string]string{
			aclClients: "src", aclConnectPorts: "port", aclHTTPPorts: "port", aclDstNames: "dstdomain", aclDstNets: "dst",
			// Derived from the destinations and the allowed private ranges.
			aclPrivate: "dst",
		},
	}
	for _, c := range []Config{
		typical(func(c *Config) { c.DenyPrivateDestinations = true; c.HostsFile = "/etc/hosts" }),
		typical(func(c *Config) { c.ClientCIDRs, c.ConnectPorts, c.HTTPPorts, c.Destinations = nil, nil, nil, nil }),
	} {
		conf, err := Render(c)
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range strings.Split(string(conf), "\n") {
			fields := strings.Fields(l)
			if len(fields) > 0 && !ck.isVariable(fields) {
				ck.known[l] = true
			}
		}
	}
	return ck
}

func (ck checker) isVariable(fields []string) bool {
	switch {
	case len(fields) == 0:
		return false
	case fields[0] == "acl":
		_, ok := ck.aclTypes[at(fields, 1)]
		return ok
	case fields[0] == "auth_param":
		return at(fields, 2) == "program"
	default:
		_, ok := ck.variable[fields[0]]
		return ok
	}
}

func at(fields []string, i int) string {
	if i < len(fields) {
		return fields[i]
	}
	return ""
}

func (ck checker) check(conf string, c Config) string {
	for i := 0; i < len(conf); i++ {
		if b := conf[i]; b != '\n' && (b < 0x20 || b > 0x7e) {
			return fmt.Sprintf("byte %#x at %d is not printable ASCII", b, i)
		}
	}
	counts := map[string]int{}
	access := map[string]bool{}
	lastAccess := ""
	for _, l := range strings.Split(strings.TrimSuffix(conf, "\n"), "\n") {
		fields := strings.Fields(l)
		if ck.known[l] || (ck.isVariable(fields) && ck.checkVariable(fields) == "") {
			counts[key(fields)]++
			if len(fields) > 0 && fields[0] == "http_access" {
				lastAccess = l
				if msg := metadataFirst(access, l); msg != "" {
					return msg
				}
				access[l] = true
			}
			continue
		}
		if ck.isVariable(fields) {
			return fmt.Sprintf("line %q: %s", l, ck.checkVariable(fields))
		}
		return fmt.Sprintf("line %q is no line Render writes", l)
	}
	return checkCounts(counts, c, lastAccess)
}

// metadataFirst refuses an allow rule that comes before both metadata
// denies: they must hold whatever the input. seen are the http_access lines
// so far.
func metadataFirst(seen map[string]bool, line string) string {
	if !strings.HasPrefix(line, "http_access allow") {
		return ""
	}
	for _, acl := range []string{aclMetadataNames, aclMetadata} {
		if !seen["http_access deny "+acl] {
			return "http_access allow before the deny of " + acl
		}
	}
	return ""
}

func key(fields []string) string {
	switch {
	case len(fields) == 0:
		return ""
	case fields[0] == "acl":
		return "acl " + fields[1]
	default:
		return fields[0]
	}
}

// checkVariable checks a line that carries input has exactly its fields and
// that each value parses back as what it claims to be.
func (ck checker) checkVariable(f []string) string {
	n := ck.variable[f[0]]
	if f[0] == "acl" && at(f, 2) == "dstdomain" {
		n = 5
	}
	if len(f) != n {
		return fmt.Sprintf("%d fields, want %d", len(f), n)
	}
	v := f[len(f)-1]
	switch {
	case f[0] == "http_port":
		if _, err := strconv.Atoi(v); err != nil {
			if _, err := netip.ParseAddrPort(v); err != nil {
				return "not a port or address:port"
			}
		}
	case f[0] == "acl":
		return ck.checkACL(f)
	case f[0] == "access_log":
		if v != "logformat="+LogFormat || !strings.HasPrefix(f[1], "stdio:/") {
			return "unexpected access_log form"
		}
	case f[0] == "auth_param":
		if f[1] != "basic" || checkPath(f[3]) != "" || checkPath(f[4]) != "" {
			return "unexpected auth_param program form"
		}
	default:
		if v != "none" && checkPath(v) != "" {
			return "not a clean absolute path"
		}
	}
	return ""
}

func (ck checker) checkACL(f []string) string {
	if ck.aclTypes[f[1]] != f[2] {
		return "ACL " + f[1] + " has type " + f[2]
	}
	v := f[len(f)-1]
	switch f[2] {
	case "src", "dst":
		p, err := netip.ParsePrefix(v)
		if err != nil || p.String() != v {
			return "not a canonical CIDR"
		}
		if f[1] == aclPrivate && !slices.ContainsFunc(privateRanges(), func(r string) bool {
			rp := netip.MustParsePrefix(r)
			return rp.Bits() <= p.Bits() && rp.Contains(p.Addr())
		}) {
			return "a denied private range outside every private range"
		}
	case "port":
		if p, err := strconv.Atoi(v); err != nil || p < 1 || p > 65535 {
			return "not a port"
		}
	case "dstdomain":
		if f[3] != "-n" {
			return "dstdomain without -n"
		}
		if _, err := parseHostname("", v); err != nil {
			return "not a hostname"
		}
	}
	return ""
}

// checkCounts shows no input made more lines than it has values, the
// singletons are single, and the last rule denies everything left.
func checkCounts(counts map[string]int, c Config, lastAccess string) string {
	limits := map[string]int{
		"acl " + aclClients:      len(c.ClientCIDRs),
		"acl " + aclConnectPorts: len(c.ConnectPorts),
		"acl " + aclHTTPPorts:    len(c.HTTPPorts),
		"acl " + aclDstNames:     len(c.Destinations),
		"acl " + aclDstNets:      len(c.Destinations),
	}
	for k, limit := range limits {
		if counts[k] > limit {
			return fmt.Sprintf("%d %q lines from %d values", counts[k], k, limit)
		}
	}
	for _, k := range []string{"http_port", "pid_filename", "cache_log", "coredump_dir", "access_log", "logformat"} {
		if counts[k] != 1 {
			return fmt.Sprintf("%d %q lines, want 1", counts[k], k)
		}
	}
	if c.DenyPrivateDestinations && counts["acl "+aclPrivate] != len(privateRanges()) {
		return fmt.Sprintf("%d private ranges denied, want all %d", counts["acl "+aclPrivate], len(privateRanges()))
	}
	if counts["hosts_file"] > 1 {
		return "more than one hosts_file line"
	}
	if lastAccess != "http_access deny all" {
		return "the last http_access line is " + strconv.Quote(lastAccess)
	}
	return ""
}
