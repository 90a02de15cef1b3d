/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package controller

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
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

func TestCRDGate(t *testing.T) {
	now := metav1.Now()
	crd := func(established apiextensionsv1.ConditionStatus, deleted *metav1.Time, versions ...apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.CustomResourceDefinition {
		c := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "kvmproxies.kvm.egressproxy.io", DeletionTimestamp: deleted},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group:    "kvm.egressproxy.io",
				Names:    apiextensionsv1.CustomResourceDefinitionNames{Kind: "KVMProxy"},
				Versions: versions,
			},
		}
		if established != "" {
			c.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{
				{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue},
				{Type: apiextensionsv1.Established, Status: established},
			}
		}
		return c
	}
	served := apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1alpha1", Served: true}
	unserved := apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1beta1"}
	gvk := func(v string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: "kvm.egressproxy.io", Version: v, Kind: "KVMProxy"}
	}
	cases := map[string]struct {
		reason string
		crd    *apiextensionsv1.CustomResourceDefinition
		want   map[schema.GroupVersionKind]bool
	}{
		"Established": {
			reason: "Each served version of an established CRD opens its kind's gate; an unserved one is not opened.",
			crd:    crd(apiextensionsv1.ConditionTrue, nil, served, unserved),
			want:   map[schema.GroupVersionKind]bool{gvk("v1alpha1"): true},
		},
		"NotEstablished": {
			reason: "A CRD not established yet closes every version's gate.",
			crd:    crd(apiextensionsv1.ConditionFalse, nil, served, unserved),
			want:   map[schema.GroupVersionKind]bool{gvk("v1alpha1"): false, gvk("v1beta1"): false},
		},
		"NoConditions": {
			reason: "A CRD the API server has not looked at yet is not established.",
			crd:    crd("", nil, served),
			want:   map[schema.GroupVersionKind]bool{gvk("v1alpha1"): false},
		},
		"Deleting": {
			reason: "A CRD being deleted closes its gates, established or not.",
			crd:    crd(apiextensionsv1.ConditionTrue, &now, served),
			want:   map[schema.GroupVersionKind]bool{gvk("v1alpha1"): false},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := &setGate{set: map[schema.GroupVersionKind]bool{}}
			if _, err := (crdGate{gate: g}).Reconcile(context.Background(), tc.crd); err != nil {
				t.Fatalf("Reconcile(...): %v", err)
			}
			if diff := cmp.Diff(tc.want, g.set); diff != "" {
				t.Errorf("%s\nReconcile(...): gate set -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestOpenServed(t *testing.T) {
	kvm := registry.Backend{Name: "kvm", Managed: schema.GroupVersionKind{Group: "kvm.m.egressproxy.io", Version: "v1alpha1", Kind: "KVMProxy"}}
	gcp := registry.Backend{Name: "gcp", Managed: schema.GroupVersionKind{Group: "gcp.m.egressproxy.io", Version: "v1alpha1", Kind: "GCPProxy"}}
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
