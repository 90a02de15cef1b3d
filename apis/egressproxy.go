/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package apis contains the Kubernetes API of the egress proxy provider, and
// the list of its backends.
package apis

import (
	"k8s.io/apimachinery/pkg/runtime"

	gcp "github.com/egressproxy/provider-egressproxy/internal/backend/gcp/desc"
	kubernetes "github.com/egressproxy/provider-egressproxy/internal/backend/kubernetes/desc"
	kvm "github.com/egressproxy/provider-egressproxy/internal/backend/kvm/desc"
	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
)

// Backends are the backends of the provider, one line each. The provider,
// the composition function, the test harness and make dev iterate this list;
// cmd/provider/backends.go lists the controller side of each.
var Backends = registry.List{
	kubernetes.Backend,
	gcp.Backend,
	kvm.Backend,
}

// AddToScheme adds every API group of the provider to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	for _, b := range Backends {
		if err := b.AddToScheme(s); err != nil {
			return err
		}
	}
	return nil
}
