/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProxyPolicy is the platform's rules, common to every backend, for the
// proxies that use a provider config. The provider applies them to every
// managed resource, written directly or composed, before it creates or
// changes anything and on every observation. An absent rule restricts
// nothing, except private destinations, which are refused unless
// allowedPrivateDestinations lists them.
type ProxyPolicy struct {
	// NamespaceSelector selects the namespaces whose managed resources may
	// use the config. Absent, every namespace may: the other rules, and
	// their safe defaults, still hold for each. It matters on a
	// ClusterProviderConfig; a ProviderConfig is only ever used from its own
	// namespace, which it is matched against all the same.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	ProxyRules `json:",inline"`
}

// ProxyRules restrict what a proxy may allow. The composition function's
// guardrails are the same rules, checked by the same code.
type ProxyRules struct {
	// AllowedPrivateDestinations are the loopback, private, link-local and
	// other special-purpose networks (those denyPrivateDestinations denies)
	// a proxy may reach. Empty, a proxy may not set denyPrivateDestinations
	// to false, and so reaches none. A proxy with denyPrivateDestinations
	// false must keep every CIDR destination that reaches a special range
	// inside one of these, and every host name destination inside
	// allowedDestinationSuffixes, since a name may resolve to any address.
	// The metadata servers stay denied whatever this says.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="allowedPrivateDestinations entries must be CIDRs such as 10.20.0.0/16"
	AllowedPrivateDestinations []string `json:"allowedPrivateDestinations,omitempty"`

	// AllowedDestinationSuffixes are the only domains host name
	// destinations may be in: example.com (or .example.com) allows
	// example.com, api.example.com and .api.example.com. CIDR and IP
	// address destinations are not names: forbiddenDestinationCIDRs governs
	// them, and forbidding 0.0.0.0/0 and ::/0 allows names only.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[.]?[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?([.][a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$`
	AllowedDestinationSuffixes []string `json:"allowedDestinationSuffixes,omitempty"`

	// ForbiddenDestinationCIDRs are networks destinations may not overlap:
	// a CIDR or IP address destination inside one, or wider than one, is
	// forbidden. Forbid 0.0.0.0/0 and ::/0 to allow host names only.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="forbiddenDestinationCIDRs entries must be CIDRs such as 169.254.0.0/16"
	ForbiddenDestinationCIDRs []string `json:"forbiddenDestinationCIDRs,omitempty"`

	// MaxClientCIDRPrefix is the widest client network a proxy may allow,
	// as the shortest prefix length per IP family: with ipv4 16 a proxy
	// may allow 10.1.0.0/16 but not 10.0.0.0/8.
	// +optional
	MaxClientCIDRPrefix *CIDRPrefixLengths `json:"maxClientCIDRPrefix,omitempty"`

	// AllowedConnectPorts are the only ports a proxy's allowedConnectPorts
	// may hold.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65535
	AllowedConnectPorts []int32 `json:"allowedConnectPorts,omitempty"`

	// AllowedHTTPPorts are the only ports a proxy's allowedHTTPPorts may
	// hold.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65535
	AllowedHTTPPorts []int32 `json:"allowedHTTPPorts,omitempty"`
}

// CIDRPrefixLengths are prefix lengths per IP family.
type CIDRPrefixLengths struct {
	// IPv4 prefix length, 0 to 32.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=32
	IPv4 *int32 `json:"ipv4,omitempty"`

	// IPv6 prefix length, 0 to 128.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	IPv6 *int32 `json:"ipv6,omitempty"`
}
