/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package config

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	kubernetesv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
)

// testScheme has the core kinds and every backend's.
func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, registry.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// kubernetesGroup is the kubernetes backend's group of kinds.
func kubernetesGroup(t *testing.T, s *runtime.Scheme) group {
	t.Helper()
	for _, b := range registry.Backends {
		if b.Managed == kubernetesv1alpha1.KubernetesProxyGroupVersionKind {
			return group{Description: b, scheme: s}
		}
	}
	t.Fatal("no kubernetes backend in registry.Backends")
	return group{}
}
