/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

// Policy is what the platform allows the proxies that use a provider
// config. The provider enforces it for every KVMProxy, composed or written
// directly, in Observe, Create and Update.
type Policy struct {
	// The rules common to every backend.
	commonv1alpha1.ProxyPolicy `json:",inline"`

	// KVM holds the rules of the kvm backend. Unset, every rule has its
	// default: the safe choice for an untrusted team.
	// +optional
	KVM *KVMPolicy `json:"kvm,omitempty"`
}

// Default ceilings of a KVMPolicy: the Compositions' largest size (4 vCPUs,
// 2 GiB) fits, with room for a larger disk.
const (
	DefaultPolicyMaxVCPUs     = 4
	DefaultPolicyMaxMemoryMiB = 4096
	DefaultPolicyMaxDiskGiB   = 20
)

// KVMPolicy is what the platform allows a KVMProxy: where its VM may live
// and how large it may be. A list that is unset has its default; a list
// set to [] allows nothing.
type KVMPolicy struct {
	// Pools a KVMProxy may use. Unset: only "default".
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Pools []string `json:"pools,omitempty"`

	// BaseImageVolumes a KVMProxy may boot. Unset: any volume of an allowed
	// pool that passes the rules that always hold. Whatever the list says,
	// a base image is never a volume of a proxy instance, an overlay (a
	// volume with a backing store) or a disk of any domain on the host: a
	// copy-on-write clone of another VM's disk would hand its data to the
	// team. List the images if the pools hold other volumes.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=255
	BaseImageVolumes []string `json:"baseImageVolumes,omitempty"`

	// Networks (libvirt networks) a KVMProxy may attach to. Unset: only
	// "default".
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Networks []string `json:"networks,omitempty"`

	// Bridges (host bridges) a KVMProxy may attach to. Unset: none.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=15
	Bridges []string `json:"bridges,omitempty"`

	// MaxVCPUs of a KVMProxy's VM. Unset: 4.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxVCPUs *int32 `json:"maxVCPUs,omitempty"`

	// MaxMemoryMiB of a KVMProxy's VM. Unset: 4096.
	// +optional
	// +kubebuilder:validation:Minimum=256
	MaxMemoryMiB *int32 `json:"maxMemoryMiB,omitempty"`

	// MaxDiskGiB of a KVMProxy's disk. Unset: 20.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxDiskGiB *int32 `json:"maxDiskGiB,omitempty"`

	// AllowUserData lets a KVMProxy replace the generated cloud-init with
	// its own (userDataSecretRef), which runs as root in a VM on the
	// platform's host, on its network. Default false.
	// +optional
	AllowUserData bool `json:"allowUserData,omitempty"`
}

// GetProxyPolicy returns the rules common to every backend.
func (pc *ProviderConfig) GetProxyPolicy() *commonv1alpha1.ProxyPolicy {
	return &pc.Spec.Policy.ProxyPolicy
}

// GetProxyPolicy returns the rules common to every backend.
func (pc *ClusterProviderConfig) GetProxyPolicy() *commonv1alpha1.ProxyPolicy {
	return &pc.Spec.Policy.ProxyPolicy
}
