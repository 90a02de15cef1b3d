/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
)

// ConditionWithinGuardrails tells the claim's owner whether the claim stays
// within the guardrails of its Composition's function input.
const ConditionWithinGuardrails = "WithinGuardrails"

// Reasons of the WithinGuardrails condition.
const (
	ReasonAllowed   = "Allowed"
	ReasonForbidden = "Forbidden"
)

const errFmtForbiddenCIDR = "the function input's guardrails.forbiddenDestinationCIDRs[%d] %q is not a CIDR such as 169.254.0.0/16"

// The managed resource's defaults, which apply when a claim leaves a port
// list empty: the guardrails check what the proxy will really allow.
var (
	defaultConnectPorts = []int32{443}
	defaultHTTPPorts    = []int32{80, 443}
)

// violations returns one message per part of the claim that breaks the
// guardrails, each naming the claim's field and the rule it broke. A claim
// within them, or an input without guardrails, has none. Guardrails the
// function cannot read are an error.
func violations(g *v1alpha1.Guardrails, s proxySpec) ([]string, error) {
	if g == nil {
		return nil, nil
	}
	forbidden, err := prefixes(g.ForbiddenDestinationCIDRs)
	if err != nil {
		return nil, err
	}
	var v []string
	for i, d := range s.AllowedDestinations {
		f := fmt.Sprintf("spec.allowedDestinations[%d] %q", i, d)
		if p, ok := destinationPrefix(d); ok {
			for _, fp := range forbidden {
				if p.Overlaps(fp) {
					v = append(v, fmt.Sprintf("%s is forbidden by guardrails.forbiddenDestinationCIDRs: it overlaps %s", f, fp))
					break
				}
			}
			continue
		}
		if len(g.AllowedDestinationSuffixes) > 0 && !withinSuffixes(d, g.AllowedDestinationSuffixes) {
			v = append(v, fmt.Sprintf("%s is not allowed by guardrails.allowedDestinationSuffixes %v", f, g.AllowedDestinationSuffixes))
		}
	}
	if m := g.MaxClientCIDRPrefix; m != nil {
		for i, c := range s.AllowedClientCIDRs {
			p, err := netip.ParsePrefix(c)
			if err != nil {
				// The XRD admits only CIDRs; one the function cannot parse
				// cannot be checked, so it is not allowed either.
				v = append(v, fmt.Sprintf("spec.allowedClientCIDRs[%d] %q is not a CIDR the guardrails can check", i, c))
				continue
			}
			p = unmap(p)
			family, limit := "ipv4", m.IPv4
			if p.Addr().Is6() {
				family, limit = "ipv6", m.IPv6
			}
			if limit != nil && int32(p.Bits()) < *limit {
				v = append(v, fmt.Sprintf("spec.allowedClientCIDRs[%d] %q is wider than guardrails.maxClientCIDRPrefix.%s /%d", i, c, family, *limit))
			}
		}
	}
	v = append(v, portViolations("allowedConnectPorts", s.AllowedConnectPorts, defaultConnectPorts, g.AllowedConnectPorts)...)
	v = append(v, portViolations("allowedHTTPPorts", s.AllowedHTTPPorts, defaultHTTPPorts, g.AllowedHTTPPorts)...)
	return v, nil
}

// portViolations checks the ports a claim asks for, or the managed
// resource's default ports when it asks for none.
func portViolations(field string, ports, defaults, allowed []int32) []string {
	if len(allowed) == 0 {
		return nil
	}
	var v []string
	if len(ports) == 0 {
		for _, p := range defaults {
			if !slices.Contains(allowed, p) {
				v = append(v, fmt.Sprintf("spec.%s is empty, so the proxy allows the default port %d, which is not in guardrails.%s %v", field, p, field, allowed))
			}
		}
		return v
	}
	for i, p := range ports {
		if !slices.Contains(allowed, p) {
			v = append(v, fmt.Sprintf("spec.%s[%d] %d is not in guardrails.%s %v", field, i, p, field, allowed))
		}
	}
	return v
}

// destinationPrefix returns the network a destination names: a CIDR, or an
// IP address, which the XRD admits as a host name and squid matches as the
// address it is.
func destinationPrefix(d string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(d); err == nil {
		return unmap(p), true
	}
	if a, err := netip.ParseAddr(strings.TrimPrefix(d, ".")); err == nil {
		return unmap(netip.PrefixFrom(a, a.BitLen())), true
	}
	return netip.Prefix{}, false
}

// unmap returns an IPv4-mapped IPv6 network (::ffff:169.254.0.0/112) as the
// IPv4 network it is, so it cannot slip past an IPv4 rule.
func unmap(p netip.Prefix) netip.Prefix {
	if !p.Addr().Is4In6() || p.Bits() < 96 {
		return p.Masked()
	}
	return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked()
}

// prefixes parses the forbidden CIDRs. Crossplane does not validate a
// function's input against its CRD, so the function does.
func prefixes(cidrs []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for i, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, errors.Errorf(errFmtForbiddenCIDR, i, c)
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
