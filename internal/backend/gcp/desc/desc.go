/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package desc describes the gcp backend to the registry: its names and
// kinds, and how the composition function composes a GCPProxy.
package desc

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/utils/ptr"

	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
	fninput "github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
)

// Name of the backend.
const Name = "gcp"

// Backend describes the gcp backend.
var Backend = registry.Backend{
	Name:    Name,
	Managed: v1alpha1.GCPProxyGroupVersionKind,
	// A Compute Engine resource name.
	MaxNameLength: 63,
	AddToScheme:   v1alpha1.SchemeBuilder.AddToScheme,
	Composer: registry.Composer{
		Resource:    "gcp-proxy",
		HasInput:    func(in *fninput.Input) bool { return in.GCP != nil },
		ForProvider: forProvider,
	},
}

const errNoZone = "the function input has no gcp.zone: a Composition for the gcp backend must choose the zone of the proxy VMs"

// Built-in machine types per size, used where the Composition's input has
// none.
const (
	defaultMachineTypeSmall  = "e2-small"
	defaultMachineTypeMedium = "e2-medium"
	defaultMachineTypeLarge  = "e2-standard-2"
)

func forProvider(in *fninput.Input, r registry.Request) (any, []string, error) {
	d := in.GCP
	if d == nil || d.Zone == "" {
		return nil, nil, errors.New(errNoZone)
	}
	return &v1alpha1.GCPProxyParameters{
		ProxyParameters: r.Proxy,
		Zone:            d.Zone,
		MachineType:     MachineTypeFor(r.Size, d.MachineTypes),
		Image:           ptr.Deref(d.Image, ""),
		Network:         ptr.Deref(d.Network, ""),
		Subnetwork:      d.Subnetwork,
		NetworkTags:     d.NetworkTags,
	}, nil, nil
}

// MachineTypeFor maps a size onto a Compute Engine machine type.
func MachineTypeFor(size string, m *fninput.MachineTypesPerSize) string {
	if m == nil {
		m = &fninput.MachineTypesPerSize{}
	}
	switch size {
	case fninput.SizeMedium:
		return firstNonEmpty(m.Medium, defaultMachineTypeMedium)
	case fninput.SizeLarge:
		return firstNonEmpty(m.Large, defaultMachineTypeLarge)
	default:
		return firstNonEmpty(m.Small, defaultMachineTypeSmall)
	}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
