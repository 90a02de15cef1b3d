/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// setGate records what the gate is told, kind by kind.
type setGate struct {
	set map[schema.GroupVersionKind]bool
}

func (g *setGate) Register(func(), ...schema.GroupVersionKind) {}

func (g *setGate) Set(gvk schema.GroupVersionKind, ready bool) bool {
	g.set[gvk] = ready
	return true
}

func TestOpenServed(t *testing.T) {
	kvm := backend.Description{Name: "kvm", Managed: schema.GroupVersionKind{Group: "kvm.m.egressproxy.io", Version: "v1alpha1", Kind: "KVMProxy"}}
	gcp := backend.Description{Name: "gcp", Managed: schema.GroupVersionKind{Group: "gcp.m.egressproxy.io", Version: "v1alpha1", Kind: "GCPProxy"}}
	serving := func(gvks ...schema.GroupVersionKind) meta.RESTMapper {
		m := meta.NewDefaultRESTMapper(nil)
		for _, gvk := range gvks {
			m.Add(gvk, meta.RESTScopeNamespace)
		}
		return m
	}
	cases := map[string]struct {
		reason string
		mapper meta.RESTMapper
		want   map[schema.GroupVersionKind]bool
	}{
		"AllServed": {
			reason: "Every kind the API server serves at start opens its gate before any controller runs.",
			mapper: serving(kvm.Managed, kvm.ProviderConfig(), kvm.ClusterProviderConfig(), gcp.Managed, gcp.ProviderConfig(), gcp.ClusterProviderConfig()),
			want: map[schema.GroupVersionKind]bool{
				kvm.Managed: true, kvm.ProviderConfig(): true, kvm.ClusterProviderConfig(): true,
				gcp.Managed: true, gcp.ProviderConfig(): true, gcp.ClusterProviderConfig(): true,
			},
		},
		"SomeServed": {
			reason: "A kind not served is left to the gate's controller, neither opened nor closed: the backend's controllers wait for its CRD.",
			mapper: serving(kvm.Managed, kvm.ProviderConfig(), kvm.ClusterProviderConfig(), gcp.ProviderConfig()),
			want: map[schema.GroupVersionKind]bool{
				kvm.Managed: true, kvm.ProviderConfig(): true, kvm.ClusterProviderConfig(): true,
				gcp.ProviderConfig(): true,
			},
		},
		"OtherVersionServed": {
			reason: "Only the version the backend's controllers use counts.",
			mapper: serving(kvm.Managed.GroupVersion().WithKind("Other"), schema.GroupVersionKind{Group: "kvm.m.egressproxy.io", Version: "v1beta1", Kind: "KVMProxy"}),
			want:   map[schema.GroupVersionKind]bool{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := &setGate{set: map[schema.GroupVersionKind]bool{}}
			openServed(tc.mapper, g, []Backend{{Description: kvm}, {Description: gcp}})
			if diff := cmp.Diff(tc.want, g.set); diff != "" {
				t.Errorf("%s\nopenServed(...): gate set -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
