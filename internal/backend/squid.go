/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package backend

import (
	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// Default proxy settings, the same as the API defaults, for objects that
// were not defaulted by an API server (unit tests, older objects).
const (
	DefaultPort        = 3128
	DefaultConnectPort = 443
)

// SquidConfig converts what the proxy allows into the squid renderer's
// input, with the paths squid uses on a VM or in the default image. Every
// backend renders the same configuration from it.
func SquidConfig(p commonv1alpha1.ProxyParameters) squid.Config {
	c := squid.Config{
		Port:                    p.Port,
		ClientCIDRs:             p.AllowedClientCIDRs,
		Destinations:            p.AllowedDestinations,
		ConnectPorts:            p.AllowedConnectPorts,
		DenyPrivateDestinations: p.DenyPrivateDestinations == nil || *p.DenyPrivateDestinations,
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if len(c.ConnectPorts) == 0 {
		c.ConnectPorts = []int32{DefaultConnectPort}
	}
	return c
}
