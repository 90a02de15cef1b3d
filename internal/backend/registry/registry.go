/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package registry lists the provider's backends, one line each. The
// provider's scheme and config controllers, the composition function, the
// test harness, the e2e, crash and render suites, the bench and make dev
// iterate this list; cmd/provider/backends.go lists the controller side of
// each. It imports each backend's descriptor package only (never its
// implementation), so the function binary links no controller manager, cloud
// SDK or go-libvirt.
package registry

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/gcp/gcpdesc"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kubernetes/kubernetesdesc"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/kvmdesc"
)

// Backends are the backends of the provider, one line each.
var Backends = List{
	kubernetesdesc.Backend,
	gcpdesc.Backend,
	kvmdesc.Backend,
}

// AddToScheme adds every backend's API group to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	for _, b := range Backends {
		if err := b.AddToScheme(s); err != nil {
			return err
		}
	}
	return nil
}

// A List of backends.
type List []backend.Description

// Lookup returns the backend named name.
func (l List) Lookup(name string) (backend.Description, bool) {
	for _, b := range l {
		if b.Name == name {
			return b, true
		}
	}
	return backend.Description{}, false
}

// Names returns the names of the backends, in order.
func (l List) Names() []string {
	out := make([]string, 0, len(l))
	for _, b := range l {
		out = append(out, b.Name)
	}
	return out
}
