/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

// Policy is what a provider config lets the proxies that use it ask for.
// The provider enforces it in Observe, Create and Update of every GCPProxy,
// composed or written directly.
type Policy struct {
	// The rules common to every backend.
	commonv1alpha1.ProxyPolicy `json:",inline"`

	// GCP rules of the GCPProxies that use this config. Absent, or any list
	// left empty, means the safe default of that list.
	// +optional
	GCP *GCPPolicy `json:"gcp,omitempty"`
}

// GCPPolicy lists what a GCPProxy may set. Each list, when empty, falls
// back to a default safe for an untrusted team.
type GCPPolicy struct {
	// Images the VMs may boot: project-relative image or family URLs, exact
	// (projects/debian-cloud/global/images/family/debian-12) or prefixes
	// ending in "/" (projects/debian-cloud/global/images/family/). Empty
	// allows only the provider's default image,
	// projects/debian-cloud/global/images/family/debian-12.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^projects/[a-z][-a-z0-9]*/global/images/(family/)?([a-z]([-a-z0-9]*[a-z0-9])?)?$`
	Images []string `json:"images,omitempty"`

	// Networks the VMs may use. Empty allows only "default".
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`
	Networks []string `json:"networks,omitempty"`

	// Subnetworks the VMs may use. Empty allows none: a VM gets the
	// network's subnetwork of its region.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`
	Subnetworks []string `json:"subnetworks,omitempty"`

	// NetworkTags the VMs may carry besides the one of their own firewall
	// rule. Firewall rules and routes of the project select VMs by tag, so
	// a tag can open what the platform meant for other VMs. Empty allows
	// none.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`
	NetworkTags []string `json:"networkTags,omitempty"`

	// MachineTypes the VMs may use. Empty allows e2-micro, e2-small,
	// e2-medium and e2-standard-2.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	MachineTypes []string `json:"machineTypes,omitempty"`

	// ServiceAccounts the VMs may run as, besides those of
	// spec.allowedServiceAccounts. Whoever controls a proxy can obtain its
	// account's tokens. Empty (and no spec.allowedServiceAccounts) allows
	// none: VMs run without a service account.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=254
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9._%+-]+@[a-z0-9.-]+$`
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`

	// Addresses are static addresses without ownership labels, reserved by
	// the platform team, that a proxy may name
	// (spec.forProvider.address.name). The first proxy to use one labels
	// it as its own, and from then on it is that proxy's only, also after
	// the proxy is deleted, until someone removes the labels. An address
	// already labelled as the proxy's own needs no entry. Empty allows
	// none.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`
	Addresses []string `json:"addresses,omitempty"`
}

// GetProxyPolicy returns the rules common to every backend.
func (pc *ProviderConfig) GetProxyPolicy() *commonv1alpha1.ProxyPolicy {
	return &pc.Spec.Policy.ProxyPolicy
}

// GetProxyPolicy returns the rules common to every backend.
func (pc *ClusterProviderConfig) GetProxyPolicy() *commonv1alpha1.ProxyPolicy {
	return &pc.Spec.Policy.ProxyPolicy
}
