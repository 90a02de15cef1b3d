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

// CredentialsSource is where the provider finds libvirt credentials.
// +kubebuilder:validation:Enum=None;Secret
type CredentialsSource string

// Credential sources of the kvm backend.
const (
	// CredentialsSourceNone needs no credentials: a local socket.
	CredentialsSourceNone CredentialsSource = "None"
	// CredentialsSourceSecret reads an SSH key and known_hosts
	// (ssh-privatekey, known_hosts) or a TLS client certificate (tls.crt,
	// tls.key, ca.crt) from a Secret.
	CredentialsSourceSecret CredentialsSource = "Secret"
)

// Credentials for a libvirt host.
// +kubebuilder:validation:XValidation:rule="(self.source == 'Secret') == has(self.secretRef)",message="credentials.secretRef must be set when, and only when, credentials.source is Secret"
type Credentials struct {
	// Source of the credentials.
	Source CredentialsSource `json:"source"`

	// SecretRef names the Secret holding the credentials.
	// +optional
	SecretRef *commonv1alpha1.SecretReference `json:"secretRef,omitempty"`
}

// ProviderConfigSpec is how the provider reaches a libvirt host.
// +kubebuilder:validation:XValidation:rule="!(self.uri.startsWith('qemu+ssh://') || self.uri.startsWith('qemu+tls://')) || self.credentials.source == 'Secret'",message="credentials.source must be Secret for a qemu+ssh:// or qemu+tls:// uri: host key or certificate verification is mandatory"
type ProviderConfigSpec struct {
	// URI of the libvirt daemon: qemu:///system (local socket),
	// qemu+unix:///system, qemu+ssh://user@host/system or
	// qemu+tls://host/system; test:///default for tests. A namespaced
	// ProviderConfig must use qemu+ssh or qemu+tls to a host: local sockets
	// are the provider's own.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^(qemu|qemu\+unix|qemu\+ssh|qemu\+tls|test|test\+unix)://[^\s"']*$`
	URI string `json:"uri"`

	// SocketPath of the local libvirt socket, for qemu:///system and
	// qemu+unix URIs. Only a ClusterProviderConfig may set it.
	// +optional
	// +kubebuilder:validation:MaxLength=107
	// +kubebuilder:validation:Pattern=`^/[^\s"']*$`
	SocketPath *string `json:"socketPath,omitempty"`

	// Credentials for the host.
	Credentials Credentials `json:"credentials"`

	// Policy is the platform's rules for the proxies that use this config,
	// enforced by the provider for every managed resource, written directly
	// or composed. Absent, the safe defaults hold: no private destination.
	// +optional
	Policy Policy `json:"policy,omitempty"`
}

// +kubebuilder:object:root=true

// A ProviderConfig configures how the provider reaches the kvm backend, for
// managed resources in its own namespace.
// +kubebuilder:printcolumn:name="HEALTHY",type="string",JSONPath=".status.conditions[?(@.type=='Healthy')].status"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="USERS",type="integer",JSONPath=".status.users"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,provider,egressproxy-all}
// +kubebuilder:validation:XValidation:rule="self.spec.credentials.source == 'Secret'",message="spec.credentials.source must be Secret in a namespaced ProviderConfig: the provider's own identity is only for a ClusterProviderConfig, so a team cannot borrow the platform's credentials"
// +kubebuilder:validation:XValidation:rule="self.spec.uri.matches('^qemu([+](ssh|tls))?://[^/?#]+')",message="spec.uri must reach a host over qemu+ssh:// or qemu+tls:// in a namespaced ProviderConfig: local sockets (qemu:///, qemu+unix://, test://) reach the provider's own libvirt and are only for a ClusterProviderConfig"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.socketPath)",message="spec.socketPath must not be set in a namespaced ProviderConfig: local sockets reach the provider's own libvirt and are only for a ClusterProviderConfig"
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

// A ClusterProviderConfig configures how the provider reaches the kvm
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
