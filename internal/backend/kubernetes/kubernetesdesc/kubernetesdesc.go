/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package kubernetesdesc describes the kubernetes backend to the registry: its names and
// kinds, its section of the composition function's input (Defaults), and
// how the function composes a KubernetesProxy from it.
// +kubebuilder:object:generate=true
package kubernetesdesc

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// Name of the backend.
const Name = "kubernetes"

// Backend describes the kubernetes backend.
var Backend = backend.Description{
	Name:    Name,
	Managed: v1alpha1.KubernetesProxyGroupVersionKind,
	// A Kubernetes DNS-1035 label: the Service's name.
	MaxNameLength: 63,
	AddToScheme:   v1alpha1.SchemeBuilder.AddToScheme,
	Composer: backend.Composer{
		Resource:    "kubernetes-proxy",
		ForProvider: forProvider,
	},
	Policy: violations,
}

// Built-in replicas per size, used where the Composition's input has none.
const (
	defaultReplicasSmall  int32 = 1
	defaultReplicasMedium int32 = 2
	defaultReplicasLarge  int32 = 3
)

func forProvider(section any, r backend.ComposeRequest) (any, []string, error) {
	d, _ := section.(*Defaults)
	if d == nil {
		d = &Defaults{}
	}
	fp := &v1alpha1.KubernetesProxyParameters{
		ProxyParameters: r.Proxy,
		Namespace:       d.Namespace,
		Image:           d.Image,
		Replicas:        ptr.To(ReplicasFor(r.Size, d.Replicas)),
	}
	if d.ServiceType != nil {
		fp.ServiceType = ptr.To(corev1.ServiceType(*d.ServiceType))
	}
	var w []string
	if fp.Namespace == "" {
		fp.Namespace = r.Namespace
		w = append(w, fmt.Sprintf("the function input has no kubernetes.namespace: the proxy runs in namespace %q of the target cluster, named like the claim's", r.Namespace))
	}
	return fp, w, nil
}

// ReplicasFor maps a size onto proxy replicas.
func ReplicasFor(size string, r *ReplicasPerSize) int32 {
	var in *int32
	def := defaultReplicasSmall
	switch size {
	case backend.SizeMedium:
		def = defaultReplicasMedium
		if r != nil {
			in = r.Medium
		}
	case backend.SizeLarge:
		def = defaultReplicasLarge
		if r != nil {
			in = r.Large
		}
	default:
		if r != nil {
			in = r.Small
		}
	}
	if in != nil {
		return *in
	}
	return def
}
