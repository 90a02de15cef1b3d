/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationKeyCredentialsRotation, on a proxy resource with generated
// credentials, is part of what its password is derived from: setting it,
// or changing its value (a date, a counter), rotates the password. The
// connection Secret carries the new one; the old one stops working.
const AnnotationKeyCredentialsRotation = "egressproxy.io/credentials-rotation"

// ProxyParameters is what an egress proxy allows, whatever backend runs it.
// Every string here ends up in a squid configuration file, so each one is
// validated at admission to a syntax that cannot break out of its directive.
type ProxyParameters struct {
	// Port the proxy listens on.
	// +optional
	// +kubebuilder:default=3128
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// AllowedClientCIDRs are the only client networks that may connect to
	// the proxy, such as 10.0.0.0/8.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="allowedClientCIDRs entries must be CIDRs such as 10.0.0.0/8 or fd00::/8"
	AllowedClientCIDRs []string `json:"allowedClientCIDRs"`

	// AllowedDestinations are the only destinations the proxy forwards to:
	// exact host names (api.example.com), suffix wildcards that match a
	// domain and its subdomains (.example.com), or CIDRs (203.0.113.0/24).
	// Empty means every destination is denied.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self) || isIP(self) || (self.matches('^[.]?[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?([.][a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$') && !self.matches('(^|[.])(0x[0-9a-f]*|[0-9]+)$'))",message="allowedDestinations entries must be a lower-case host name (api.example.com), a suffix wildcard (.example.com), an IP address or a CIDR (203.0.113.0/24); a name must not end in a number (0x08080808, 134744072 and 127.1 are addresses)"
	AllowedDestinations []string `json:"allowedDestinations,omitempty"`

	// AllowedConnectPorts are the only destination ports CONNECT (HTTPS
	// tunnelling) may reach. Leave it out for the default [443]. An empty
	// list is refused rather than read as "no CONNECT": the provider writes
	// an empty list back as absent (omitempty), and the default would then
	// silently turn it into [443].
	// +optional
	// +kubebuilder:default={443}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65535
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="allowedConnectPorts must name at least one port; leave it out for the default [443]"
	AllowedConnectPorts []int32 `json:"allowedConnectPorts,omitempty"`

	// AllowedHTTPPorts are the only destination ports plain HTTP requests
	// (every method but CONNECT) may reach. Leave it out for the default
	// [80, 443]; an empty list is refused, as for AllowedConnectPorts.
	// +optional
	// +kubebuilder:default={80,443}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65535
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="allowedHTTPPorts must name at least one port; leave it out for the default [80, 443]"
	AllowedHTTPPorts []int32 `json:"allowedHTTPPorts,omitempty"`

	// CredentialsSecretRef names a Secret in the resource's namespace with
	// the keys username and password the proxy accepts. When it is absent
	// the provider generates credentials, published in the connection
	// Secret; the annotation egressproxy.io/credentials-rotation rotates
	// them whenever its value changes.
	// +optional
	CredentialsSecretRef *LocalSecretReference `json:"credentialsSecretRef,omitempty"`

	// DenyPrivateDestinations denies destinations in the loopback, private
	// (RFC 1918), CGNAT, link-local, documentation, NAT64, 6to4 and the
	// other special-purpose ranges of RFC 6890, even when an allowed name
	// resolves to one of them, so the proxy cannot be used to reach the
	// network it runs in. False still denies them except the CIDR and
	// address destinations and the provider config's
	// spec.policy.allowedPrivateDestinations, whatever a name resolves to.
	// The cloud metadata servers (169.254.169.254, fd20:ce::254,
	// fd00:ec2::254, metadata.google.internal) are denied whatever this
	// says.
	// +optional
	// +kubebuilder:default=true
	DenyPrivateDestinations *bool `json:"denyPrivateDestinations,omitempty"`
}

// InstanceState is the lifecycle state of a proxy instance on its backend.
// +kubebuilder:validation:Enum=Pending;Running;Stopped;Terminated;Unknown
type InstanceState string

// Instance states. Stopped and Terminated instances are replaced.
const (
	StatePending    InstanceState = "Pending"
	StateRunning    InstanceState = "Running"
	StateStopped    InstanceState = "Stopped"
	StateTerminated InstanceState = "Terminated"
	StateUnknown    InstanceState = "Unknown"
)

// ProxyObservation is what the backend reports about a proxy instance.
type ProxyObservation struct {
	// Endpoint clients use, as host:port.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// EgressIPs are the public addresses traffic leaves from: one for a VM,
	// one per node running a ready proxy pod for Kubernetes.
	// +optional
	EgressIPs []string `json:"egressIPs,omitempty"`

	// InstanceID is the self-contained backend ID of the instance: it holds
	// everything needed to find the instance again.
	// +optional
	InstanceID string `json:"instanceID,omitempty"`

	// State of the instance on its backend.
	// +optional
	State InstanceState `json:"state,omitempty"`

	// CreatedAt is the creation time the backend reports.
	// +optional
	CreatedAt *metav1.Time `json:"createdAt,omitempty"`

	// ConfigChecksum is the checksum of the proxy configuration the
	// instance runs, so a change of the allowlist can be followed.
	// +optional
	ConfigChecksum string `json:"configChecksum,omitempty"`
}

// LocalSecretReference names a Secret in the namespace of the referencing
// object.
type LocalSecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// LocalSecretKeySelector selects a key of a Secret in the namespace of the
// referencing object.
type LocalSecretKeySelector struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Key within the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// SecretReference names a Secret. Namespace is required for a
// ClusterProviderConfig; a namespaced ProviderConfig always reads Secrets
// from its own namespace, so a config can never reach another namespace.
type SecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Namespace of the Secret. Ignored by a namespaced ProviderConfig.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// SecretKeySelector selects a key of a Secret; see SecretReference for how
// the namespace is chosen.
type SecretKeySelector struct {
	SecretReference `json:",inline"`

	// Key within the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}
