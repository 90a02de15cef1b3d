/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// DataPlaneConfig is the squid configuration a proxy of this backend runs
// for p, paths included: make bench runs squid with it (hack/bench,
// overhead.go) to measure the backend's data plane.
func DataPlaneConfig(p commonv1alpha1.ProxyParameters) squid.Config {
	return squidConfig(Desired{Proxy: p})
}
