/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	"reflect"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

// KVMNetwork is where the VM's NIC attaches: a libvirt network or a bridge.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.bridge)",message="network must set exactly one of name and bridge"
type KVMNetwork struct {
	// Name of a libvirt network with DHCP; the IP is read from its lease.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][-_.A-Za-z0-9]*$`
	Name *string `json:"name,omitempty"`

	// Bridge on the host; the IP is read from the guest agent.
	// +optional
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][-_.A-Za-z0-9]*$`
	Bridge *string `json:"bridge,omitempty"`
}

// KVMProxyParameters are the configurable fields of a KVMProxy.
type KVMProxyParameters struct {
	commonv1alpha1.ProxyParameters `json:",inline"`

	// Pool is the libvirt storage pool of the base image and of the VM's
	// volumes.
	// +optional
	// +kubebuilder:default="default"
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][-_.A-Za-z0-9]*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="pool is immutable: create a new KVMProxy to move the proxy"
	Pool string `json:"pool,omitempty"`

	// BaseImageVolume is the volume in pool holding a cloud-init enabled
	// image the VM's disk is an overlay of.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][-_.A-Za-z0-9]*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="baseImageVolume is immutable: create a new KVMProxy to change the image"
	BaseImageVolume string `json:"baseImageVolume"`

	// DiskGiB is the size of the VM's disk.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2048
	DiskGiB int32 `json:"diskGiB,omitempty"`

	// MemoryMiB of the VM. The guest image (hack/guest-image.sh) does not
	// boot with less than 256.
	// +optional
	// +kubebuilder:default=512
	// +kubebuilder:validation:Minimum=256
	// +kubebuilder:validation:Maximum=65536
	MemoryMiB int32 `json:"memoryMiB,omitempty"`

	// VCPUs of the VM.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	VCPUs int32 `json:"vcpus,omitempty"`

	// Network the VM's NIC attaches to.
	// +optional
	// +kubebuilder:default={"name": "default"}
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="network is immutable: create a new KVMProxy to change the network"
	Network *KVMNetwork `json:"network,omitempty"`

	// DomainType is kvm (hardware virtualisation) or qemu (emulation).
	// +optional
	// +kubebuilder:default=kvm
	// +kubebuilder:validation:Enum=kvm;qemu
	DomainType string `json:"domainType,omitempty"`

	// UserDataSecretRef replaces the generated cloud-init user-data with
	// the user's own.
	// +optional
	UserDataSecretRef *commonv1alpha1.LocalSecretKeySelector `json:"userDataSecretRef,omitempty"`
}

// KVMProxyObservation is what libvirt reports.
type KVMProxyObservation struct {
	commonv1alpha1.ProxyObservation `json:",inline"`

	// MACAddress of the VM's NIC, derived from the resource's UID so a
	// re-created VM keeps its DHCP lease.
	// +optional
	MACAddress string `json:"macAddress,omitempty"`
}

// A KVMProxySpec defines the desired state of a KVMProxy.
// +kubebuilder:validation:XValidation:rule="!has(self.providerConfigRef) || self.providerConfigRef.kind in ['ProviderConfig', 'ClusterProviderConfig']",message="providerConfigRef.kind must be ProviderConfig or ClusterProviderConfig"
type KVMProxySpec struct {
	xpv2.ManagedResourceSpec `json:",inline"`
	ForProvider              KVMProxyParameters `json:"forProvider"`
}

// A KVMProxyStatus represents the observed state of a KVMProxy.
type KVMProxyStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`
	AtProvider                 KVMProxyObservation `json:"atProvider,omitempty"`
}

// +kubebuilder:object:root=true

// A KVMProxy is an egress proxy on a libvirt VM: an overlay volume of a base image, a cloud-init seed ISO and a domain.
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="EXTERNAL-NAME",type="string",JSONPath=".metadata.annotations.crossplane\\.io/external-name"
// +kubebuilder:printcolumn:name="ENDPOINT",type="string",JSONPath=".status.atProvider.endpoint"
// +kubebuilder:printcolumn:name="EGRESS-IP",type="string",JSONPath=".status.atProvider.egressIPs[0]"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,managed,egressproxy-all}
type KVMProxy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   KVMProxySpec   `json:"spec"`
	Status KVMProxyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// KVMProxyList contains a list of KVMProxy.
type KVMProxyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KVMProxy `json:"items"`
}

// KVMProxy type metadata.
var (
	KVMProxyKind             = reflect.TypeOf(KVMProxy{}).Name()
	KVMProxyGroupKind        = schema.GroupKind{Group: Group, Kind: KVMProxyKind}.String()
	KVMProxyKindAPIVersion   = KVMProxyKind + "." + SchemeGroupVersion.String()
	KVMProxyGroupVersionKind = SchemeGroupVersion.WithKind(KVMProxyKind)
)

func init() {
	SchemeBuilder.Register(&KVMProxy{}, &KVMProxyList{})
}
