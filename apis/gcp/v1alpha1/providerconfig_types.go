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

// CredentialsSource is where the provider finds Google Cloud credentials.
// +kubebuilder:validation:Enum=Secret;InjectedIdentity;ImpersonateServiceAccount
type CredentialsSource string

// Credential sources of the gcp backend.
const (
	// CredentialsSourceSecret reads a service account JSON key from a Secret.
	CredentialsSourceSecret CredentialsSource = "Secret"
	// CredentialsSourceInjectedIdentity uses application default
	// credentials, such as GKE workload identity.
	CredentialsSourceInjectedIdentity CredentialsSource = "InjectedIdentity"
	// CredentialsSourceImpersonateServiceAccount impersonates a service
	// account with application default credentials.
	CredentialsSourceImpersonateServiceAccount CredentialsSource = "ImpersonateServiceAccount"
)

// ImpersonateServiceAccount names the service account to impersonate.
type ImpersonateServiceAccount struct {
	// Name is the e-mail of the service account.
	// +kubebuilder:validation:MaxLength=254
	// +kubebuilder:validation:Pattern=`^[a-z0-9._%+-]+@[a-z0-9.-]+$`
	Name string `json:"name"`
}

// Credentials for Google Cloud. Exactly one source is used.
// +kubebuilder:validation:XValidation:rule="(self.source == 'Secret') == has(self.secretRef)",message="credentials.secretRef must be set when, and only when, credentials.source is Secret"
// +kubebuilder:validation:XValidation:rule="(self.source == 'ImpersonateServiceAccount') == has(self.impersonateServiceAccount)",message="credentials.impersonateServiceAccount must be set when, and only when, credentials.source is ImpersonateServiceAccount"
type Credentials struct {
	// Source of the credentials.
	Source CredentialsSource `json:"source"`

	// SecretRef selects the key of a Secret holding a service account JSON key.
	// +optional
	SecretRef *commonv1alpha1.SecretKeySelector `json:"secretRef,omitempty"`

	// ImpersonateServiceAccount to act as.
	// +optional
	ImpersonateServiceAccount *ImpersonateServiceAccount `json:"impersonateServiceAccount,omitempty"`
}

// ProviderConfigSpec is how the provider reaches a Google Cloud project.
type ProviderConfigSpec struct {
	// ProjectID of the Google Cloud project proxies are created in.
	// +kubebuilder:validation:Pattern=`^[a-z][-a-z0-9]{4,28}[a-z0-9]$`
	ProjectID string `json:"projectID"`

	// Credentials for the project.
	Credentials Credentials `json:"credentials"`

	// Endpoint overrides the Compute Engine API endpoint, for private
	// endpoints and tests, such as https://compute.example.internal.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^\s"']+$`
	Endpoint *string `json:"endpoint,omitempty"`

	// AllowedServiceAccounts are the service accounts a GCPProxy using this
	// config may attach to its VM (spec.forProvider.serviceAccountEmail).
	// Empty means none: VMs run without a service account. Anyone who can
	// write a GCPProxy can reach the tokens of the account its VM runs as,
	// so list only accounts every such user may act as.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=254
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.matches('^[a-z0-9._%+-]+@[a-z0-9.-]+$'))",message="spec.allowedServiceAccounts must hold service account e-mails such as proxy@my-project.iam.gserviceaccount.com"
	AllowedServiceAccounts []string `json:"allowedServiceAccounts,omitempty"`

	// Policy is the platform's rules for the proxies that use this config,
	// enforced by the provider for every managed resource, written directly
	// or composed. Absent, the safe defaults hold: no private destination.
	// +optional
	Policy Policy `json:"policy,omitempty"`
}

// +kubebuilder:object:root=true

// A ProviderConfig configures how the provider reaches the gcp backend, for
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

// A ClusterProviderConfig configures how the provider reaches the gcp
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
