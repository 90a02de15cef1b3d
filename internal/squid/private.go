/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"fmt"
	"net/netip"
	"slices"
)

// MaxAllowedPrivateDestinations bounds AllowedPrivateDestinations, as the
// policy's CRD does.
const MaxAllowedPrivateDestinations = 64

const fieldAllowedPrivate = "allowedPrivateDestinations"

// deniedPrivate returns the special-purpose ranges squid refuses for c,
// whose CIDR and address destinations are nets: every one of them while
// DenyPrivateDestinations is true; else what of them lies outside nets and
// AllowedPrivateDestinations. Without it a proxy that turned the check off
// would reach every private address an allowed name resolves to, the
// metadata server's neighbours and the proxy's own host included.
//
// The ranges squid matches are computed here rather than written as
// "deny private !allowed": squid's dst ACL matches when any of a name's
// addresses does, so a name resolving to one allowed and one other private
// address would pass that rule and squid could connect to the other.
func deniedPrivate(c Config, nets []netip.Prefix) ([]netip.Prefix, error) {
	if len(c.AllowedPrivateDestinations) > MaxAllowedPrivateDestinations {
		return nil, fmt.Errorf(errFmtTooMany, fieldAllowedPrivate, len(c.AllowedPrivateDestinations), MaxAllowedPrivateDestinations)
	}
	var holes []netip.Prefix
	if !c.DenyPrivateDestinations {
		holes = slices.Clone(nets)
		for i, v := range c.AllowedPrivateDestinations {
			// The platform's CIDRs, which admission (isCIDR) takes with
			// host bits or IPv4-mapped: only ranges derived from them
			// reach the file, so they are read as the networks they mean.
			p, err := netip.ParsePrefix(v)
			if err != nil || p.Addr().Zone() != "" {
				return nil, valueError(index(fieldAllowedPrivate, i), v, reasonNotCIDR)
			}
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			holes = append(holes, p.Masked())
		}
	}
	// Holes inside others go first: a policy's range holds the proxy's
	// private destinations, so few holes remain, and few splits.
	holes = minimalPrefixes(holes)
	var out []netip.Prefix
	for _, r := range privateRanges() {
		out = append(out, subtract(netip.MustParsePrefix(r), holes)...)
	}
	return out, nil
}

// subtract returns the prefixes that cover r except holes, in address
// order. A hole inside r splits it into the siblings of the prefixes on the
// way down to the hole: one per bit between their lengths.
func subtract(r netip.Prefix, holes []netip.Prefix) []netip.Prefix {
	for _, h := range holes {
		if !r.Overlaps(h) {
			continue
		}
		if h.Bits() <= r.Bits() {
			return nil
		}
		var out []netip.Prefix
		a := h.Addr().AsSlice()
		for b := r.Bits() + 1; b <= h.Bits(); b++ {
			sib := slices.Clone(a)
			sib[(b-1)/8] ^= 0x80 >> ((b - 1) % 8)
			s, _ := netip.AddrFromSlice(sib)
			out = append(out, subtract(netip.PrefixFrom(s, b).Masked(), holes)...)
		}
		slices.SortFunc(out, func(x, y netip.Prefix) int { return x.Addr().Compare(y.Addr()) })
		return out
	}
	return []netip.Prefix{r}
}
