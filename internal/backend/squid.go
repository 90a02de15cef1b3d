/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package backend

import (
	"golang.org/x/crypto/bcrypt"

	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// Default proxy settings, the same as the API defaults, for objects that
// were not defaulted by an API server (unit tests, older objects).
const (
	DefaultPort        = 3128
	DefaultConnectPort = 443
)

// DefaultHTTPPorts are the API default of allowedHTTPPorts.
func DefaultHTTPPorts() []int32 { return []int32{80, 443} }

// SquidConfig converts what the proxy of d allows into the squid renderer's
// input, with the paths squid uses on a VM or in the default image. Every
// backend renders the same configuration from it.
//
// An empty port list takes the API default: the API refuses an empty list
// (minItems 1), so here it can only mean the field was never defaulted. The
// renderer itself denies on an empty list.
func SquidConfig[P any](d Desired[P]) squid.Config {
	p := d.Proxy
	c := squid.Config{
		Port:                    p.Port,
		ClientCIDRs:             p.AllowedClientCIDRs,
		Destinations:            p.AllowedDestinations,
		ConnectPorts:            p.AllowedConnectPorts,
		HTTPPorts:               p.AllowedHTTPPorts,
		DenyPrivateDestinations: p.DenyPrivateDestinations == nil || *p.DenyPrivateDestinations,
	}
	if !c.DenyPrivateDestinations {
		// Only then: the policy of the config does not change the
		// configuration of a proxy that denies every private range.
		c.AllowedPrivateDestinations = d.AllowedPrivateDestinations
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if len(c.ConnectPorts) == 0 {
		c.ConnectPorts = []int32{DefaultConnectPort}
	}
	if len(c.HTTPPorts) == 0 {
		c.HTTPPorts = DefaultHTTPPorts()
	}
	return c
}

// HtpasswdCost is the bcrypt cost of the htpasswd hash of c. A slow hash
// only protects a password that can be guessed: a password the provider
// generated is 32 characters drawn at random from 57 (~186 bits), which no
// work factor makes harder to find, so it gets bcrypt.MinCost (~1 ms to
// hash instead of ~60 ms, which at 1000 new proxies was most of the
// provider's CPU). A password a person chose gets squid.MaxCost, the
// highest cost a Verifier compares.
func HtpasswdCost(c Credentials) int {
	if c.Generated {
		return bcrypt.MinCost
	}
	return squid.MaxCost
}
