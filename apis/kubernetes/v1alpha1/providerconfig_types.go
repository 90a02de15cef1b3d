/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	"reflect"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

// CredentialsSource is where the provider finds the target cluster's credentials.
// +kubebuilder:validation:Enum=Secret;InjectedIdentity
type CredentialsSource string

// Credential sources of the kubernetes backend.
const (
	// CredentialsSourceSecret reads a kubeconfig from a Secret.
	CredentialsSourceSecret CredentialsSource = "Secret"
	// CredentialsSourceInjectedIdentity uses the provider's own service
	// account: the target is the cluster the provider runs in.
	CredentialsSourceInjectedIdentity CredentialsSource = "InjectedIdentity"
)

// Credentials of a target cluster.
// +kubebuilder:validation:XValidation:rule="self.source != 'Secret' || has(self.secretRef)",message="credentials.secretRef is required when credentials.source is Secret"
// +kubebuilder:validation:XValidation:rule="self.source == 'Secret' || !has(self.secretRef)",message="credentials.secretRef must not be set when credentials.source is InjectedIdentity: choose exactly one credential source"
type Credentials struct {
	// Source of the credentials.
	Source CredentialsSource `json:"source"`

	// SecretRef selects the key of a Secret holding a kubeconfig.
	// +optional
	SecretRef *commonv1alpha1.SecretKeySelector `json:"secretRef,omitempty"`
}

// ProviderConfigSpec is how the provider reaches a target cluster, and what
// the proxies that use it may ask of that cluster. The allowlists matter most
// on a ClusterProviderConfig: every team's proxies use its credentials.
type ProviderConfigSpec struct {
	// Credentials of the target cluster.
	Credentials Credentials `json:"credentials"`

	// AllowedNamespaces of the target cluster the proxies may run in: names,
	// or "*" for any namespace. Empty allows only the namespace named like the
	// managed resource's own namespace. kube-system, kube-public and
	// kube-node-lease are refused whatever this says.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$`
	// +kubebuilder:validation:XValidation:rule="self.all(n, !(n in ['kube-system', 'kube-public', 'kube-node-lease']))",message="spec.allowedNamespaces: kube-system, kube-public and kube-node-lease are reserved for the cluster and never allowed"
	AllowedNamespaces []string `json:"allowedNamespaces,omitempty"`

	// AllowedImages the proxies may run, compared as written (no registry or
	// tag is implied): an exact reference (registry.example.com/squid:6.10),
	// or a prefix ending in "/" (every image under that registry or path),
	// ":" (every tag of that repository) or "@" (every digest of it). Empty
	// allows only the provider's default image.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^[^\s"'\\]+$`
	AllowedImages []string `json:"allowedImages,omitempty"`

	// Policy is the platform's rules for the proxies that use this config,
	// enforced by the provider for every managed resource, written directly
	// or composed. Absent, the safe defaults hold: no private destination.
	// +optional
	Policy Policy `json:"policy,omitempty"`
}

// +kubebuilder:object:root=true

// A ProviderConfig configures how the provider reaches the kubernetes backend, for
// managed resources in its own namespace.
// +kubebuilder:printcolumn:name="HEALTHY",type="string",JSONPath=".status.conditions[?(@.type=='Healthy')].status"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="USERS",type="integer",JSONPath=".status.users"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,provider,egressproxy-all}
// +kubebuilder:validation:XValidation:rule="self.spec.credentials.source == 'Secret'",message="spec.credentials.source must be Secret in a namespaced ProviderConfig: the provider's own identity is only for a ClusterProviderConfig, so a team cannot borrow the platform's credentials"
type ProviderConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProviderConfigSpec   `json:"spec"`
	Status ProviderConfigStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ProviderConfigList contains a list of ProviderConfig.
type ProviderConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderConfig `json:"items"`
}

// +kubebuilder:object:root=true

// A ClusterProviderConfig configures how the provider reaches the kubernetes
// backend, for managed resources in any namespace.
// +kubebuilder:printcolumn:name="HEALTHY",type="string",JSONPath=".status.conditions[?(@.type=='Healthy')].status"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="USERS",type="integer",JSONPath=".status.users"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories={crossplane,provider,egressproxy-all}
type ClusterProviderConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProviderConfigSpec   `json:"spec"`
	Status ProviderConfigStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ClusterProviderConfigList contains a list of ClusterProviderConfig.
type ClusterProviderConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterProviderConfig `json:"items"`
}

// A ProviderConfigStatus reflects the observed state of a provider config.
type ProviderConfigStatus struct {
	xpv2.ProviderConfigStatus `json:",inline"`
}

// Provider config type metadata.
var (
	ProviderConfigKind                    = reflect.TypeOf(ProviderConfig{}).Name()
	ProviderConfigGroupVersionKind        = SchemeGroupVersion.WithKind(ProviderConfigKind)
	ClusterProviderConfigKind             = reflect.TypeOf(ClusterProviderConfig{}).Name()
	ClusterProviderConfigGroupVersionKind = SchemeGroupVersion.WithKind(ClusterProviderConfigKind)
)

func init() {
	SchemeBuilder.Register(&ProviderConfig{}, &ProviderConfigList{})
	SchemeBuilder.Register(&ClusterProviderConfig{}, &ClusterProviderConfigList{})
}
