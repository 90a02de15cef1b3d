/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"fmt"

	"github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
)

// Built-in size mappings, used where the Composition's input has none.
const (
	defaultReplicasSmall  int32 = 1
	defaultReplicasMedium int32 = 2
	defaultReplicasLarge  int32 = 3

	defaultMachineTypeSmall  = "e2-small"
	defaultMachineTypeMedium = "e2-medium"
	defaultMachineTypeLarge  = "e2-standard-2"
)

// Built-in VM sizes of the kvm backend.
func defaultKVMSize(size string) v1alpha1.KVMSize {
	switch size {
	case v1alpha1.SizeMedium:
		return v1alpha1.KVMSize{VCPUs: 2, MemoryMiB: 1024}
	case v1alpha1.SizeLarge:
		return v1alpha1.KVMSize{VCPUs: 4, MemoryMiB: 2048}
	default:
		return v1alpha1.KVMSize{VCPUs: 1, MemoryMiB: 512}
	}
}

// sizeOf returns the size a claim asks for. The XRD restricts and defaults
// size, so anything else means the XR skipped validation: compose a small
// proxy rather than none, and say so.
func sizeOf(s string) (string, []string) {
	switch s {
	case v1alpha1.SizeSmall, v1alpha1.SizeMedium, v1alpha1.SizeLarge:
		return s, nil
	case "":
		return v1alpha1.SizeSmall, nil
	default:
		return v1alpha1.SizeSmall, []string{fmt.Sprintf("unknown spec.size %q: composing a small proxy (sizes are small, medium and large)", s)}
	}
}

// replicasFor maps a size onto proxy replicas.
func replicasFor(size string, r *v1alpha1.ReplicasPerSize) int32 {
	var in *int32
	def := defaultReplicasSmall
	switch size {
	case v1alpha1.SizeMedium:
		def = defaultReplicasMedium
		if r != nil {
			in = r.Medium
		}
	case v1alpha1.SizeLarge:
		def = defaultReplicasLarge
		if r != nil {
			in = r.Large
		}
	default:
		if r != nil {
			in = r.Small
		}
	}
	if in != nil {
		return *in
	}
	return def
}

// machineTypeFor maps a size onto a Compute Engine machine type.
func machineTypeFor(size string, m *v1alpha1.MachineTypesPerSize) string {
	if m == nil {
		m = &v1alpha1.MachineTypesPerSize{}
	}
	switch size {
	case v1alpha1.SizeMedium:
		return firstNonEmpty(m.Medium, defaultMachineTypeMedium)
	case v1alpha1.SizeLarge:
		return firstNonEmpty(m.Large, defaultMachineTypeLarge)
	default:
		return firstNonEmpty(m.Small, defaultMachineTypeSmall)
	}
}

// kvmSizeFor maps a size onto the vCPUs and memory of a VM.
func kvmSizeFor(size string, s *v1alpha1.KVMSizes) v1alpha1.KVMSize {
	var in *v1alpha1.KVMSize
	if s != nil {
		switch size {
		case v1alpha1.SizeMedium:
			in = s.Medium
		case v1alpha1.SizeLarge:
			in = s.Large
		default:
			in = s.Small
		}
	}
	if in != nil {
		return *in
	}
	return defaultKVMSize(size)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
