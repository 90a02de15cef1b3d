/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package config

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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

// groups are every backend's group of kinds.
func groups(s *runtime.Scheme) []group {
	gs := make([]group, 0, len(registry.Backends))
	for _, b := range registry.Backends {
		gs = append(gs, group{Description: b, scheme: s})
	}
	return gs
}

// kubernetesGroup is the kubernetes backend's group of kinds.
func kubernetesGroup(t *testing.T, s *runtime.Scheme) group {
	t.Helper()
	for _, g := range groups(s) {
		if g.Managed == kubernetesv1alpha1.KubernetesProxyGroupVersionKind {
			return g
		}
	}
	t.Fatal("no kubernetes backend in registry.Backends")
	return group{}
}

// fakeKube is the fake API server the config controllers' tests share:
// every backend's configs have a status, its managed resources are indexed
// by config and Secrets by the configs holding them, as Setup does, and
// funcs intercept its calls.
func fakeKube(t *testing.T, s *runtime.Scheme, funcs interceptor.Funcs, objs ...client.Object) client.WithWatch {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithIndex(&corev1.Secret{}, indexHeld, heldOf).WithInterceptorFuncs(funcs)
	for _, g := range groups(s) {
		kinds := make([]client.Object, 3)
		for i, gvk := range []schema.GroupVersionKind{g.Managed, g.ProviderConfig(), g.ClusterProviderConfig()} {
			o, err := g.object(gvk)
			if err != nil {
				t.Fatal(err)
			}
			kinds[i] = o
		}
		b = b.WithIndex(kinds[0], indexConfigRef, configRefOf).WithStatusSubresource(kinds[1:]...)
	}
	return b.Build()
}
