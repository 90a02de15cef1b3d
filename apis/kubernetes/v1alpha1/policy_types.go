/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

// Policy is what a provider config lets the proxies that use it ask for.
// The provider enforces it in Observe, Create and Update of every
// KubernetesProxy, composed or written directly. The namespaces and images
// a proxy may use are spec.allowedNamespaces and spec.allowedImages.
type Policy struct {
	// The rules common to every backend.
	commonv1alpha1.ProxyPolicy `json:",inline"`

	// Kubernetes rules of the KubernetesProxies that use this config.
	// Absent, or any field left empty, means the safe default of that
	// field.
	// +optional
	Kubernetes *KubernetesPolicy `json:"kubernetes,omitempty"`
}

// KubernetesPolicy bounds what a KubernetesProxy may set. Each field, when
// empty, falls back to a default safe for an untrusted team.
type KubernetesPolicy struct {
	// ServiceTypes the proxy's Service may have. Empty allows only
	// ClusterIP: a NodePort or LoadBalancer Service opens the proxy beyond
	// the cluster.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:items:Enum=ClusterIP;NodePort;LoadBalancer
	ServiceTypes []corev1.ServiceType `json:"serviceTypes,omitempty"`

	// LoadBalancerIPs a LoadBalancer Service may ask for
	// (spec.forProvider.loadBalancerIP): addresses or CIDRs. Empty allows
	// none: a pinned address may be another team's.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=49
	// +kubebuilder:validation:XValidation:rule="self.all(a, isIP(a) || isCIDR(a))",message="spec.policy.kubernetes.loadBalancerIPs must hold IP addresses or CIDRs"
	LoadBalancerIPs []string `json:"loadBalancerIPs,omitempty"`

	// Tolerations the proxy pods may carry, compared by key, operator,
	// value and effect (tolerationSeconds is free). Empty allows any
	// toleration that does not tolerate the control-plane taints
	// (node-role.kubernetes.io/control-plane and
	// node-role.kubernetes.io/master), so no key-less Exists either.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// NodeSelectors the proxy pods may use: "key" (any value of that
	// label) or "key=value". Empty allows any node selector except on the
	// control-plane labels (node-role.kubernetes.io/control-plane and
	// node-role.kubernetes.io/master).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=317
	NodeSelectors []string `json:"nodeSelectors,omitempty"`

	// MaxReplicas a proxy may run. Absent allows 3.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`

	// MaxResources bounds every request and limit of the proxy container,
	// per resource. Absent allows at most 1 CPU and 1Gi of memory; a
	// resource not named here may not be requested at all.
	// +optional
	MaxResources corev1.ResourceList `json:"maxResources,omitempty"`
}

// GetProxyPolicy returns the rules common to every backend.
func (pc *ProviderConfig) GetProxyPolicy() *commonv1alpha1.ProxyPolicy {
	return &pc.Spec.Policy.ProxyPolicy
}

// GetProxyPolicy returns the rules common to every backend.
func (pc *ClusterProviderConfig) GetProxyPolicy() *commonv1alpha1.ProxyPolicy {
	return &pc.Spec.Policy.ProxyPolicy
}
