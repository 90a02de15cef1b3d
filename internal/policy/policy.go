/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

const (
	errFmtBadCIDR     = "%s.%s[%d] %q is not a CIDR"
	errFmtBadSelector = "%s.namespaceSelector is not a valid label selector"
)

// The managed resource's defaults, which apply when a port list is empty:
// the rules check what the proxy will really allow.
var (
	defaultConnectPorts = []int32{443}
	defaultHTTPPorts    = []int32{80, 443}
)

// Paths say where the checked fields are, so that each message names the
// field and the rule it broke as its reader writes them.
type Paths struct {
	// Proxy is the path of the proxy's parameters: spec.forProvider of a
	// managed resource, spec of a claim.
	Proxy string
	// Rules is the path of the rules: `ClusterProviderConfig "lab"
	// spec.policy`, or guardrails in the function's input.
	Rules string
}

// PrivateRanges are the destinations denyPrivateDestinations refuses: the
// IANA special-purpose ranges (RFC 6890 and its updates) that are not
// globally reachable, and those that embed an IPv4 address a relay or
// translator would reach on the proxy's behalf (NAT64, 6to4, Teredo in
// 2001::/23). IPv4: "this network", RFC 1918, CGNAT, loopback, link-local
// (the metadata server), IETF protocol assignments, the documentation and
// benchmarking nets, the 6to4 relay anycast, multicast and reserved. IPv6:
// ::/96 (unspecified, loopback and IPv4-compatible), NAT64 (64:ff9b::/96
// and the local-use 64:ff9b:1::/48), discard-only, IETF protocol
// assignments, documentation, 6to4, SRv6 SIDs, ULA, link-local, the old
// site-local and multicast. No range overlaps another, which squid would
// warn about. IPv4-mapped IPv6 (::ffff:0:0/96) is left out on purpose:
// squid stores IPv4 addresses in that form, so it would match every IPv4
// host; the IPv4 ranges cover those addresses anyway (and the rules here
// read a mapped network as the IPv4 network it is).
func PrivateRanges() []string {
	return []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
		"198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		"::/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/23", "2001:db8::/32",
		"2002::/16", "3fff::/20", "5f00::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
	}
}

var privateRanges = func() []netip.Prefix {
	r := PrivateRanges()
	out := make([]netip.Prefix, len(r))
	for i, c := range r {
		out[i] = netip.MustParsePrefix(c)
	}
	return out
}()

// Violations returns one message per part of p that breaks rules, each
// naming p's field and the rule it broke; none when p is within them.
// Rules that cannot be read are an error, never a rule that allows all.
//
// With no rules at all p still may not reach a private range: it may not
// set denyPrivateDestinations to false. With it false, every destination
// that reaches a private range must lie in allowedPrivateDestinations, and
// every host name in allowedDestinationSuffixes.
func Violations(rules commonv1alpha1.ProxyRules, p commonv1alpha1.ProxyParameters, at Paths) ([]string, error) {
	forbidden, err := prefixes(rules.ForbiddenDestinationCIDRs, "forbiddenDestinationCIDRs", at)
	if err != nil {
		return nil, err
	}
	private, err := prefixes(rules.AllowedPrivateDestinations, "allowedPrivateDestinations", at)
	if err != nil {
		return nil, err
	}
	var v []string
	denyPrivate := p.DenyPrivateDestinations == nil || *p.DenyPrivateDestinations
	if !denyPrivate && len(private) == 0 {
		v = append(v, fmt.Sprintf("%s.denyPrivateDestinations false is not allowed: %s.allowedPrivateDestinations lists no private range the proxy may reach", at.Proxy, at.Rules))
	}
	for i, d := range p.AllowedDestinations {
		if m := destinationViolation(rules, forbidden, private, denyPrivate, d, at); m != "" {
			v = append(v, fmt.Sprintf("%s.allowedDestinations[%d] %q %s", at.Proxy, i, d, m))
		}
	}
	v = append(v, clientViolations(rules.MaxClientCIDRPrefix, p.AllowedClientCIDRs, at)...)
	v = append(v, portViolations("allowedConnectPorts", p.AllowedConnectPorts, defaultConnectPorts, rules.AllowedConnectPorts, at)...)
	v = append(v, portViolations("allowedHTTPPorts", p.AllowedHTTPPorts, defaultHTTPPorts, rules.AllowedHTTPPorts, at)...)
	return v, nil
}

// destinationViolation returns why destination d breaks the rules, or "".
// A destination breaks one rule at most: the first it breaks is named.
func destinationViolation(rules commonv1alpha1.ProxyRules, forbidden, private []netip.Prefix, denyPrivate bool, d string, at Paths) string {
	p, ok := destinationPrefix(d)
	if !ok {
		if numericHost(d) {
			return "is a numeric host form that resolves to an address no CIDR rule sees: write the address as a.b.c.d or a CIDR"
		}
		suffixes := rules.AllowedDestinationSuffixes
		if len(suffixes) > 0 && !withinSuffixes(d, suffixes) {
			return fmt.Sprintf("is not allowed by %s.allowedDestinationSuffixes %v", at.Rules, suffixes)
		}
		if !denyPrivate && len(suffixes) == 0 {
			// A name may resolve to any address, private ones included.
			return fmt.Sprintf("is a host name, which may resolve to any private address while denyPrivateDestinations is false: %s.allowedDestinationSuffixes must list its domain", at.Rules)
		}
		return ""
	}
	for _, fp := range forbidden {
		if p.Overlaps(fp) {
			return fmt.Sprintf("is forbidden by %s.forbiddenDestinationCIDRs: it overlaps %s", at.Rules, fp)
		}
	}
	if denyPrivate {
		// The proxy itself refuses every private address, resolved names
		// included: what of d is private is never reached.
		return ""
	}
	for _, r := range privateRanges {
		if !p.Overlaps(r) {
			continue
		}
		// What of r the destination reaches: the narrower of the two.
		reached := p
		if r.Bits() > p.Bits() {
			reached = r
		}
		if within(reached, private) {
			continue
		}
		if reached == p {
			return fmt.Sprintf("is a private range not in %s.allowedPrivateDestinations", at.Rules)
		}
		return fmt.Sprintf("reaches the private range %s, which is not in %s.allowedPrivateDestinations", r, at.Rules)
	}
	return ""
}

// within reports whether p lies inside one of nets.
func within(p netip.Prefix, nets []netip.Prefix) bool {
	for _, n := range nets {
		if n.Bits() <= p.Bits() && n.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

func clientViolations(m *commonv1alpha1.CIDRPrefixLengths, cidrs []string, at Paths) []string {
	if m == nil {
		return nil
	}
	var v []string
	for i, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			// Admission takes only CIDRs; one that cannot be parsed
			// cannot be checked, so it is not allowed either.
			v = append(v, fmt.Sprintf("%s.allowedClientCIDRs[%d] %q is not a CIDR %s can check", at.Proxy, i, c, at.Rules))
			continue
		}
		p = unmap(p)
		family, limit := "ipv4", m.IPv4
		if p.Addr().Is6() {
			family, limit = "ipv6", m.IPv6
		}
		if limit != nil && int32(p.Bits()) < *limit {
			v = append(v, fmt.Sprintf("%s.allowedClientCIDRs[%d] %q is wider than %s.maxClientCIDRPrefix.%s /%d", at.Proxy, i, c, at.Rules, family, *limit))
		}
	}
	return v
}

// portViolations checks the ports a proxy asks for, or the managed
// resource's default ports when it asks for none.
func portViolations(field string, ports, defaults, allowed []int32, at Paths) []string {
	if len(allowed) == 0 {
		return nil
	}
	var v []string
	if len(ports) == 0 {
		for _, p := range defaults {
			if !slices.Contains(allowed, p) {
				v = append(v, fmt.Sprintf("%s.%s is empty, so the proxy allows the default port %d, which is not in %s.%s %v", at.Proxy, field, p, at.Rules, field, allowed))
			}
		}
		return v
	}
	for i, p := range ports {
		if !slices.Contains(allowed, p) {
			v = append(v, fmt.Sprintf("%s.%s[%d] %d is not in %s.%s %v", at.Proxy, field, i, p, at.Rules, field, allowed))
		}
	}
	return v
}

// NamespaceViolation returns why a resource in namespace ns, whose labels
// are nsLabels, may not use a config with selector sel, or "". No selector
// selects every namespace.
func NamespaceViolation(sel *metav1.LabelSelector, ns string, nsLabels map[string]string, at Paths) (string, error) {
	if sel == nil {
		return "", nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return "", errors.Wrapf(err, errFmtBadSelector, at.Rules)
	}
	if s.Matches(labels.Set(nsLabels)) {
		return "", nil
	}
	return fmt.Sprintf("namespace %q is not selected by %s.namespaceSelector", ns, at.Rules), nil
}

// destinationPrefix returns the network a destination names: a CIDR, or an
// IP address, which admission takes as a host name and squid matches as
// the address it is.
func destinationPrefix(d string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(d); err == nil {
		return unmap(p), true
	}
	if a, err := netip.ParseAddr(strings.TrimPrefix(d, ".")); err == nil {
		return unmap(netip.PrefixFrom(a, a.BitLen())), true
	}
	return netip.Prefix{}, false
}

// numericHost reports whether a host name's last label is a number
// (134744072, 0x08080808, 010.0.0.1): resolvers read such names as IPv4
// addresses in decimal, hex or octal, which no CIDR rule would see. No
// top-level domain is numeric.
func numericHost(d string) bool {
	last := d[strings.LastIndexByte(d, '.')+1:]
	if last == "" {
		return false
	}
	digits := strings.TrimPrefix(strings.TrimPrefix(last, "0x"), "0X")
	if digits == "" {
		return true
	}
	hex := digits != last
	for _, c := range digits {
		if !('0' <= c && c <= '9' || hex && ('a' <= c && c <= 'f' || 'A' <= c && c <= 'F')) {
			return false
		}
	}
	return true
}

// unmap returns an IPv4-mapped IPv6 network (::ffff:169.254.0.0/112) as the
// IPv4 network it is, so it cannot slip past an IPv4 rule.
func unmap(p netip.Prefix) netip.Prefix {
	if !p.Addr().Is4In6() || p.Bits() < 96 {
		return p.Masked()
	}
	return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked()
}

// prefixes parses a list of CIDRs of the rules. Admission validates them on
// a provider config, but Crossplane does not validate a function's input
// against its CRD.
func prefixes(cidrs []string, field string, at Paths) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for i, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, errors.Errorf(errFmtBadCIDR, at.Rules, field, i, c)
		}
		out = append(out, unmap(p))
	}
	return out, nil
}

// withinSuffixes reports whether a host name destination, exact
// (api.example.com) or a suffix wildcard (.example.com), lies in one of the
// allowed domains.
func withinSuffixes(d string, suffixes []string) bool {
	name := strings.TrimPrefix(d, ".")
	for _, s := range suffixes {
		s = strings.TrimPrefix(s, ".")
		if s == "" {
			continue
		}
		if name == s || strings.HasSuffix(name, "."+s) {
			return true
		}
	}
	return false
}
