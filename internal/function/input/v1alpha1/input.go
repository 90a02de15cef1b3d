/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

// Input type metadata.
const (
	Group      = "egressproxy.fn.egressproxy.io"
	Version    = "v1alpha1"
	Kind       = "Input"
	APIVersion = Group + "/" + Version
)

// A Backend runs egress proxies: each has its own managed resource kind.
// +kubebuilder:validation:Enum=kubernetes;gcp;kvm
type Backend string

// Backends.
const (
	BackendKubernetes Backend = "kubernetes"
	BackendGCP        Backend = "gcp"
	BackendKVM        Backend = "kvm"
)

// Sizes an app team can ask for. The function maps each onto backend
// values: replicas on kubernetes, a machine type on gcp, vCPUs and memory on
// kvm.
const (
	SizeSmall  = "small"
	SizeMedium = "medium"
	SizeLarge  = "large"
)

// Input configures function-egressproxy for one Composition: the backend it
// composes and the defaults the platform team chooses for it, which a claim
// cannot override.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:categories=crossplane
// +kubebuilder:validation:XValidation:rule="self.backend != 'gcp' || has(self.gcp)",message="gcp must be set when backend is gcp: it holds the required zone"
// +kubebuilder:validation:XValidation:rule="self.backend != 'kvm' || has(self.kvm)",message="kvm must be set when backend is kvm: it holds the required baseImageVolume"
type Input struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Backend the Composition composes a managed resource for.
	Backend Backend `json:"backend"`

	// ProviderConfigRef the composed managed resource uses. When absent the
	// managed resource's default applies: the ClusterProviderConfig named
	// default.
	// +optional
	ProviderConfigRef *ProviderConfigReference `json:"providerConfigRef,omitempty"`

	// Kubernetes defaults, used when backend is kubernetes.
	// +optional
	Kubernetes *KubernetesDefaults `json:"kubernetes,omitempty"`

	// GCP defaults, used when backend is gcp.
	// +optional
	GCP *GCPDefaults `json:"gcp,omitempty"`

	// KVM defaults, used when backend is kvm.
	// +optional
	KVM *KVMDefaults `json:"kvm,omitempty"`

	// Guardrails restrict what a claim may ask for. A claim that asks for
	// more gets WithinGuardrails=False naming the field and the rule, and
	// nothing new is composed for it: a proxy composed before keeps its
	// last configuration. Absent, a claim may ask for anything its schema
	// allows; its proxy still denies private destinations, which a claim
	// cannot turn off.
	// +optional
	Guardrails *Guardrails `json:"guardrails,omitempty"`
}

// Guardrails are the platform team's limits on a claim: the rules a
// provider config's spec.policy holds, but for namespaceSelector (who may
// use a Composition is the XRD's RBAC), checked by the same code, so a
// claim is refused with the provider's message. Each rule that is absent or
// empty restricts nothing.
type Guardrails struct {
	commonv1alpha1.ProxyRules `json:",inline"`
}

// A ProviderConfigReference names a ProviderConfig in the claim's namespace
// or a ClusterProviderConfig.
type ProviderConfigReference struct {
	// Kind of the provider config.
	// +kubebuilder:validation:Enum=ProviderConfig;ClusterProviderConfig
	Kind string `json:"kind"`

	// Name of the provider config.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// KubernetesDefaults are the platform defaults of a KubernetesProxy.
type KubernetesDefaults struct {
	// Namespace of the target cluster the proxies run in. When absent the
	// proxy runs in a namespace named like the claim's, and the function
	// warns: that is only right when the provider config targets the
	// cluster the claims live in.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// Image of the squid container. The managed resource's default when
	// absent.
	// +optional
	Image *string `json:"image,omitempty"`

	// ServiceType of the Service in front of the proxy. The managed
	// resource's default (ClusterIP) when absent.
	// +optional
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	ServiceType *string `json:"serviceType,omitempty"`

	// Replicas per size. Defaults: small 1, medium 2, large 3.
	// +optional
	Replicas *ReplicasPerSize `json:"replicas,omitempty"`
}

// ReplicasPerSize maps each size onto a number of proxy replicas.
type ReplicasPerSize struct {
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	Small *int32 `json:"small,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	Medium *int32 `json:"medium,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	Large *int32 `json:"large,omitempty"`
}

// GCPDefaults are the platform defaults of a GCPProxy.
type GCPDefaults struct {
	// Zone of the proxy VMs, such as europe-west1-b. Required: the
	// function returns a fatal result without it.
	// +kubebuilder:validation:MinLength=1
	Zone string `json:"zone"`

	// Image of the boot disk. The managed resource's default when absent.
	// +optional
	Image *string `json:"image,omitempty"`

	// Network of the VMs. The managed resource's default when absent.
	// +optional
	Network *string `json:"network,omitempty"`

	// Subnetwork of the VMs, in the zone's region.
	// +optional
	Subnetwork *string `json:"subnetwork,omitempty"`

	// NetworkTags added to the VMs.
	// +optional
	NetworkTags []string `json:"networkTags,omitempty"`

	// MachineTypes per size. Defaults: small e2-small, medium e2-medium,
	// large e2-standard-2.
	// +optional
	MachineTypes *MachineTypesPerSize `json:"machineTypes,omitempty"`
}

// MachineTypesPerSize maps each size onto a Compute Engine machine type.
type MachineTypesPerSize struct {
	// +optional
	Small string `json:"small,omitempty"`
	// +optional
	Medium string `json:"medium,omitempty"`
	// +optional
	Large string `json:"large,omitempty"`
}

// KVMDefaults are the platform defaults of a KVMProxy.
type KVMDefaults struct {
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
	Network *KVMNetwork `json:"network,omitempty"`

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
	Sizes *KVMSizes `json:"sizes,omitempty"`
}

// KVMNetwork is a libvirt network or a host bridge; set exactly one.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.bridge)",message="kvm.network must set exactly one of name and bridge"
type KVMNetwork struct {
	// Name of a libvirt network.
	// +optional
	Name *string `json:"name,omitempty"`

	// Bridge on the host.
	// +optional
	Bridge *string `json:"bridge,omitempty"`
}

// KVMSizes maps each size onto the resources of a VM.
type KVMSizes struct {
	// +optional
	Small *KVMSize `json:"small,omitempty"`
	// +optional
	Medium *KVMSize `json:"medium,omitempty"`
	// +optional
	Large *KVMSize `json:"large,omitempty"`
}

// KVMSize is the resources of a VM.
type KVMSize struct {
	// VCPUs of the VM.
	// +kubebuilder:validation:Minimum=1
	VCPUs int32 `json:"vcpus"`

	// MemoryMiB of the VM.
	// +kubebuilder:validation:Minimum=128
	MemoryMiB int32 `json:"memoryMiB"`
}
