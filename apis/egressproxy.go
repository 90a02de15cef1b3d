/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package apis contains the Kubernetes API of the egress proxy provider.
package apis

import (
	"k8s.io/apimachinery/pkg/runtime"

	gcpv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	kubernetesv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	kvmv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
)

// AddToScheme adds every API group of the provider to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		kubernetesv1alpha1.SchemeBuilder.AddToScheme,
		gcpv1alpha1.SchemeBuilder.AddToScheme,
		kvmv1alpha1.SchemeBuilder.AddToScheme,
	} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}
