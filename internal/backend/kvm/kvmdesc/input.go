/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvmdesc

// The section's deepcopy methods, which the input's call (see generate.go).
//go:generate go tool controller-gen object:headerFile=../../../../hack/boilerplate.go.txt paths=.

// Defaults are the kvm section of the function input: the platform
// defaults of a KVMProxy. Its field in the input is named like the backend.
type Defaults struct {
	// Pool of the base image and the VMs' volumes. The managed resource's
	// default when absent.
	// +optional
	Pool *string `json:"pool,omitempty"`

	// BaseImageVolume is the cloud-init enabled image in pool the VMs'
	// disks overlay. Required: the function returns a fatal result without
	// it.
	// +kubebuilder:validation:MinLength=1
	BaseImageVolume string `json:"baseImageVolume"`

	// Network the VMs attach to. The managed resource's default (the
	// libvirt network named default) when absent.
	// +optional
	Network *Network `json:"network,omitempty"`

	// DomainType is kvm (hardware virtualisation) or qemu (emulation). The
	// managed resource's default (kvm) when absent.
	// +optional
	// +kubebuilder:validation:Enum=kvm;qemu
	DomainType *string `json:"domainType,omitempty"`

	// DiskGiB of the VMs. The managed resource's default when absent.
	// +optional
	// +kubebuilder:validation:Minimum=1
	DiskGiB *int32 `json:"diskGiB,omitempty"`

	// Sizes maps each size onto vCPUs and memory. Defaults: small 1 vCPU
	// 512 MiB, medium 2 vCPUs 1024 MiB, large 4 vCPUs 2048 MiB.
	// +optional
	Sizes *Sizes `json:"sizes,omitempty"`
}

// Network is a libvirt network or a host bridge; set exactly one.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.bridge)",message="kvm.network must set exactly one of name and bridge"
type Network struct {
	// Name of a libvirt network.
	// +optional
	Name *string `json:"name,omitempty"`

	// Bridge on the host.
	// +optional
	Bridge *string `json:"bridge,omitempty"`
}

// Sizes maps each size onto the resources of a VM.
type Sizes struct {
	// +optional
	Small *KVMSize `json:"small,omitempty"`
	// +optional
	Medium *KVMSize `json:"medium,omitempty"`
	// +optional
	Large *KVMSize `json:"large,omitempty"`
}

// Named KVMSize, not Size: the input's CRD shows the comment below as the
// description of each size.

// KVMSize is the resources of a VM.
type KVMSize struct {
	// VCPUs of the VM.
	// +kubebuilder:validation:Minimum=1
	VCPUs int32 `json:"vcpus"`

	// MemoryMiB of the VM.
	// +kubebuilder:validation:Minimum=128
	MemoryMiB int32 `json:"memoryMiB"`
}
