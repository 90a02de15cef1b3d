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

// GCPAddress chooses the static external address of the proxy.
type GCPAddress struct {
	// Name of an existing regional static address to use. When absent the
	// provider reserves one named after the instance, so the egress IP
	// survives replacement of the VM. An address that carries another
	// proxy's ownership labels is refused; a named address is never
	// deleted.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`
	Name *string `json:"name,omitempty"`
}

// LabelValue is the value of a GCE label: at most 63 lower-case letters,
// digits, dashes and underscores. A named type bounds its length, which keeps
// the CEL rules on the map within the apiserver's cost budget.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^[-_a-z0-9]*$`
type LabelValue string

// GCPProxyParameters are the configurable fields of a GCPProxy.
type GCPProxyParameters struct {
	commonv1alpha1.ProxyParameters `json:",inline"`

	// Zone of the VM, such as europe-west1-b.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]+-[a-z]+[0-9]+-[a-z]$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="zone is immutable: create a new GCPProxy to move the proxy"
	Zone string `json:"zone"`

	// MachineType of the VM, such as e2-small.
	// +optional
	// +kubebuilder:default="e2-small"
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	MachineType string `json:"machineType,omitempty"`

	// Image of the boot disk, as a project-relative image or family URL.
	// +optional
	// +kubebuilder:default="projects/debian-cloud/global/images/family/debian-12"
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^projects/[a-z][-a-z0-9]*/global/images/(family/)?[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="image is immutable: create a new GCPProxy to change the boot image"
	Image string `json:"image,omitempty"`

	// Network of the VM's interface.
	// +optional
	// +kubebuilder:default="default"
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="network is immutable: create a new GCPProxy to change the network"
	Network string `json:"network,omitempty"`

	// Subnetwork of the VM's interface, in the zone's region.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="subnetwork is immutable: create a new GCPProxy to change the subnetwork"
	Subnetwork *string `json:"subnetwork,omitempty"`

	// NetworkTags added to the VM, besides the one the firewall rule targets.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`
	NetworkTags []string `json:"networkTags,omitempty"`

	// Labels added to the VM, besides the ownership labels.
	// +optional
	// +kubebuilder:validation:MaxProperties=48
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z][-_a-z0-9]{0,62}$'))",message="labels keys must start with a lower-case letter and hold at most 63 lower-case letters, digits, - or _"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('egressproxy-'))",message="labels keys starting with egressproxy- are reserved for ownership labels"
	Labels map[string]LabelValue `json:"labels,omitempty"`

	// ServiceAccountEmail the VM runs as. None when absent. It must be
	// listed in the provider config's spec.allowedServiceAccounts; the VM
	// gets the logging.write and monitoring.write scopes only.
	// +optional
	// +kubebuilder:validation:MaxLength=254
	// +kubebuilder:validation:Pattern=`^[a-z0-9._%+-]+@[a-z0-9.-]+$`
	ServiceAccountEmail *string `json:"serviceAccountEmail,omitempty"`

	// Address chooses the static external address.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="address is immutable: the egress IP is meant to stay"
	Address *GCPAddress `json:"address,omitempty"`

	// RetainAddressOnDelete keeps the reserved static address when the
	// GCPProxy is deleted, so the egress IP can be reused.
	// +optional
	// +kubebuilder:default=false
	RetainAddressOnDelete bool `json:"retainAddressOnDelete,omitempty"`
}

// GCPProxyObservation is what Compute Engine reports.
type GCPProxyObservation struct {
	commonv1alpha1.ProxyObservation `json:",inline"`

	// InternalIP of the VM.
	// +optional
	InternalIP string `json:"internalIP,omitempty"`

	// AddressName of the static address the VM uses.
	// +optional
	AddressName string `json:"addressName,omitempty"`

	// FirewallName of the rule that admits the allowed clients.
	// +optional
	FirewallName string `json:"firewallName,omitempty"`
}

// A GCPProxySpec defines the desired state of a GCPProxy.
// +kubebuilder:validation:XValidation:rule="!has(self.providerConfigRef) || self.providerConfigRef.kind in ['ProviderConfig', 'ClusterProviderConfig']",message="providerConfigRef.kind must be ProviderConfig or ClusterProviderConfig"
type GCPProxySpec struct {
	xpv2.ManagedResourceSpec `json:",inline"`
	ForProvider              GCPProxyParameters `json:"forProvider"`
}

// A GCPProxyStatus represents the observed state of a GCPProxy.
type GCPProxyStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`
	AtProvider                 GCPProxyObservation `json:"atProvider,omitempty"`
}

// +kubebuilder:object:root=true

// A GCPProxy is an egress proxy on a Compute Engine VM with a static external address and a firewall rule.
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="EXTERNAL-NAME",type="string",JSONPath=".metadata.annotations.crossplane\\.io/external-name"
// +kubebuilder:printcolumn:name="ENDPOINT",type="string",JSONPath=".status.atProvider.endpoint"
// +kubebuilder:printcolumn:name="EGRESS-IP",type="string",JSONPath=".status.atProvider.egressIPs[0]"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,managed,egressproxy-all}
type GCPProxy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GCPProxySpec   `json:"spec"`
	Status GCPProxyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// GCPProxyList contains a list of GCPProxy.
type GCPProxyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GCPProxy `json:"items"`
}

// GCPProxy type metadata.
var (
	GCPProxyKind             = reflect.TypeOf(GCPProxy{}).Name()
	GCPProxyGroupKind        = schema.GroupKind{Group: Group, Kind: GCPProxyKind}.String()
	GCPProxyKindAPIVersion   = GCPProxyKind + "." + SchemeGroupVersion.String()
	GCPProxyGroupVersionKind = SchemeGroupVersion.WithKind(GCPProxyKind)
)

func init() {
	SchemeBuilder.Register(&GCPProxy{}, &GCPProxyList{})
}
