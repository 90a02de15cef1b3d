/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetesdesc

// The section's deepcopy methods, which the input's call (see generate.go).
//go:generate go tool controller-gen object:headerFile=../../../../hack/boilerplate.go.txt paths=.

// Defaults are the kubernetes section of the function input: the platform
// defaults of a KubernetesProxy. Its field in the input is named like the backend.
type Defaults struct {
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
