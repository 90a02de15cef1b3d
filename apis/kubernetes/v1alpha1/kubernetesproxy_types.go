/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	"reflect"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

// KubernetesProxyParameters are the configurable fields of a KubernetesProxy.
// +kubebuilder:validation:XValidation:rule="!has(self.loadBalancerIP) || (has(self.serviceType) && self.serviceType == 'LoadBalancer')",message="loadBalancerIP can only be set when serviceType is LoadBalancer"
type KubernetesProxyParameters struct {
	commonv1alpha1.ProxyParameters `json:",inline"`

	// Namespace of the target cluster the proxy runs in. It must exist, and
	// the provider config's allowedNamespaces must allow it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="namespace is immutable: create a new KubernetesProxy to move the proxy"
	// +kubebuilder:validation:XValidation:rule="!(self in ['kube-system', 'kube-public', 'kube-node-lease'])",message="spec.forProvider.namespace: kube-system, kube-public and kube-node-lease are reserved for the cluster: choose another namespace"
	Namespace string `json:"namespace"`

	// Replicas of the proxy. More than one adds a PodDisruptionBudget.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	Replicas *int32 `json:"replicas,omitempty"`

	// Image of the proxy container, which the provider config's
	// allowedImages must allow. The container runs /usr/sbin/squid as user
	// 13 (proxy on Debian and Ubuntu) on a read-only root file system, with
	// the configuration at /etc/squid/squid.conf and the basic_ncsa_auth
	// helper at /usr/lib/squid/basic_ncsa_auth: a Debian or Ubuntu squid
	// package provides all of it.
	// +optional
	// +kubebuilder:default="docker.io/ubuntu/squid:5.2-22.04_beta"
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^\s"'\\]+$`
	Image *string `json:"image,omitempty"`

	// Resources of the proxy container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// ServiceType of the Service in front of the proxy.
	// +optional
	// +kubebuilder:default=ClusterIP
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	ServiceType *corev1.ServiceType `json:"serviceType,omitempty"`

	// LoadBalancerIP asks a LoadBalancer Service for this address.
	// +optional
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="loadBalancerIP must be an IP address"
	LoadBalancerIP *string `json:"loadBalancerIP,omitempty"`

	// NodeSelector pins the proxy pods to egress nodes, whose ExternalIP
	// addresses become the egress IPs.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations let the proxy pods run on tainted egress nodes.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// KubernetesProxyObservation is what the target cluster reports.
type KubernetesProxyObservation struct {
	commonv1alpha1.ProxyObservation `json:",inline"`

	// AvailableReplicas of the proxy Deployment.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`
}

// A KubernetesProxySpec defines the desired state of a KubernetesProxy.
// +kubebuilder:validation:XValidation:rule="!has(self.providerConfigRef) || self.providerConfigRef.kind in ['ProviderConfig', 'ClusterProviderConfig']",message="providerConfigRef.kind must be ProviderConfig or ClusterProviderConfig"
type KubernetesProxySpec struct {
	xpv2.ManagedResourceSpec `json:",inline"`
	ForProvider              KubernetesProxyParameters `json:"forProvider"`
}

// A KubernetesProxyStatus represents the observed state of a KubernetesProxy.
type KubernetesProxyStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`
	AtProvider                 KubernetesProxyObservation `json:"atProvider,omitempty"`
}

// +kubebuilder:object:root=true

// A KubernetesProxy is an egress proxy (squid Deployment, Service and
// configuration) in a Kubernetes cluster.
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="EXTERNAL-NAME",type="string",JSONPath=".metadata.annotations.crossplane\\.io/external-name"
// +kubebuilder:printcolumn:name="ENDPOINT",type="string",JSONPath=".status.atProvider.endpoint"
// +kubebuilder:printcolumn:name="EGRESS-IP",type="string",JSONPath=".status.atProvider.egressIPs[0]"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,managed,egressproxy-all}
type KubernetesProxy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   KubernetesProxySpec   `json:"spec"`
	Status KubernetesProxyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// KubernetesProxyList contains a list of KubernetesProxy.
type KubernetesProxyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubernetesProxy `json:"items"`
}

// KubernetesProxy type metadata.
var (
	KubernetesProxyKind             = reflect.TypeOf(KubernetesProxy{}).Name()
	KubernetesProxyGroupKind        = schema.GroupKind{Group: Group, Kind: KubernetesProxyKind}.String()
	KubernetesProxyKindAPIVersion   = KubernetesProxyKind + "." + SchemeGroupVersion.String()
	KubernetesProxyGroupVersionKind = SchemeGroupVersion.WithKind(KubernetesProxyKind)
)

func init() {
	SchemeBuilder.Register(&KubernetesProxy{}, &KubernetesProxyList{})
}
