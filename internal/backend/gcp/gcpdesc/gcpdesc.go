/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package gcpdesc describes the gcp backend to the registry: its names and
// kinds, its section of the composition function's input (Defaults), and
// how the function composes a GCPProxy from it.
// +kubebuilder:object:generate=true
package gcpdesc

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/utils/ptr"

	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// Name of the backend.
const Name = "gcp"

// Backend describes the gcp backend.
var Backend = backend.Description{
	Name:    Name,
	Managed: v1alpha1.GCPProxyGroupVersionKind,
	// A Compute Engine resource name.
	MaxNameLength: 63,
	AddToScheme:   v1alpha1.SchemeBuilder.AddToScheme,
	Composer: backend.Composer{
		Resource:    "gcp-proxy",
		ForProvider: forProvider,
	},
	Policy: violations,
}

const errNoZone = "the function input has no gcp.zone: a Composition for the gcp backend must choose the zone of the proxy VMs"

// Built-in machine types per size, used where the Composition's input has
// none.
const (
	defaultMachineTypeSmall  = "e2-small"
	defaultMachineTypeMedium = "e2-medium"
	defaultMachineTypeLarge  = "e2-standard-2"
)

func forProvider(section any, r backend.ComposeRequest) (any, []string, error) {
	d, _ := section.(*Defaults)
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
func MachineTypeFor(size string, m *MachineTypesPerSize) string {
	if m == nil {
		m = &MachineTypesPerSize{}
	}
	switch size {
	case backend.SizeMedium:
		return firstNonEmpty(m.Medium, defaultMachineTypeMedium)
	case backend.SizeLarge:
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
