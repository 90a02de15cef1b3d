/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package kvmdesc describes the kvm backend to the registry: its names and
// kinds, its section of the composition function's input (Defaults), and
// how the function composes a KVMProxy from it. It imports no libvirt
// client.
// +kubebuilder:object:generate=true
package kvmdesc

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/utils/ptr"

	"github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// Name of the backend.
const Name = "kvm"

// Backend describes the kvm backend.
var Backend = backend.Description{
	Name:    Name,
	Managed: v1alpha1.KVMProxyGroupVersionKind,
	// A libvirt domain and volume name.
	MaxNameLength: 63,
	AddToScheme:   v1alpha1.SchemeBuilder.AddToScheme,
	Composer: backend.Composer{
		Resource:    "kvm-proxy",
		ForProvider: forProvider,
	},
	Policy: violations,
}

const (
	errNoBaseImage = "the function input has no kvm.baseImageVolume: a Composition for the kvm backend must choose the image the proxy VMs boot"
	errNetwork     = "the function input's kvm.network must set exactly one of name and bridge"
)

func forProvider(section any, r backend.ComposeRequest) (any, []string, error) {
	d, _ := section.(*Defaults)
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
func SizeFor(size string, s *Sizes) KVMSize {
	var in *KVMSize
	if s != nil {
		switch size {
		case backend.SizeMedium:
			in = s.Medium
		case backend.SizeLarge:
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
func defaultSize(size string) KVMSize {
	switch size {
	case backend.SizeMedium:
		return KVMSize{VCPUs: 2, MemoryMiB: 1024}
	case backend.SizeLarge:
		return KVMSize{VCPUs: 4, MemoryMiB: 2048}
	default:
		return KVMSize{VCPUs: 1, MemoryMiB: 512}
	}
}
