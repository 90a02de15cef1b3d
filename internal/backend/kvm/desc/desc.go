/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package desc describes the kvm backend to the registry: its names and
// kinds, and how the composition function composes a KVMProxy. It imports
// no libvirt client.
package desc

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/utils/ptr"

	"github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
	fninput "github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
)

// Name of the backend.
const Name = "kvm"

// Backend describes the kvm backend.
var Backend = registry.Backend{
	Name:    Name,
	Managed: v1alpha1.KVMProxyGroupVersionKind,
	// A libvirt domain and volume name.
	MaxNameLength: 63,
	AddToScheme:   v1alpha1.SchemeBuilder.AddToScheme,
	Composer: registry.Composer{
		Resource:    "kvm-proxy",
		HasInput:    func(in *fninput.Input) bool { return in.KVM != nil },
		ForProvider: forProvider,
	},
}

const (
	errNoBaseImage = "the function input has no kvm.baseImageVolume: a Composition for the kvm backend must choose the image the proxy VMs boot"
	errNetwork     = "the function input's kvm.network must set exactly one of name and bridge"
)

func forProvider(in *fninput.Input, r registry.Request) (any, []string, error) {
	d := in.KVM
	if d == nil || d.BaseImageVolume == "" {
		return nil, nil, errors.New(errNoBaseImage)
	}
	sz := SizeFor(r.Size, d.Sizes)
	fp := &v1alpha1.KVMProxyParameters{
		ProxyParameters: r.Proxy,
		Pool:            ptr.Deref(d.Pool, ""),
		BaseImageVolume: d.BaseImageVolume,
		DiskGiB:         ptr.Deref(d.DiskGiB, 0),
		VCPUs:           sz.VCPUs,
		MemoryMiB:       sz.MemoryMiB,
		DomainType:      ptr.Deref(d.DomainType, ""),
	}
	if n := d.Network; n != nil {
		if (n.Name == nil) == (n.Bridge == nil) {
			return nil, nil, errors.New(errNetwork)
		}
		fp.Network = &v1alpha1.KVMNetwork{Name: n.Name, Bridge: n.Bridge}
	}
	return fp, nil, nil
}

// SizeFor maps a size onto the vCPUs and memory of a VM.
func SizeFor(size string, s *fninput.KVMSizes) fninput.KVMSize {
	var in *fninput.KVMSize
	if s != nil {
		switch size {
		case fninput.SizeMedium:
			in = s.Medium
		case fninput.SizeLarge:
			in = s.Large
		default:
			in = s.Small
		}
	}
	if in != nil {
		return *in
	}
	return defaultSize(size)
}

// defaultSize is the built-in VM size of a size.
func defaultSize(size string) fninput.KVMSize {
	switch size {
	case fninput.SizeMedium:
		return fninput.KVMSize{VCPUs: 2, MemoryMiB: 1024}
	case fninput.SizeLarge:
		return fninput.KVMSize{VCPUs: 4, MemoryMiB: 2048}
	default:
		return fninput.KVMSize{VCPUs: 1, MemoryMiB: 512}
	}
}
