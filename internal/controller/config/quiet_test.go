/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package config

import (
	"context"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/providerconfig"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/egressproxy/provider-egressproxy/apis"
	kubernetesv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
)

// fakeManager is the part of a manager crossplane-runtime's config
// reconciler uses.
type fakeManager struct {
	ctrl.Manager
	c client.Client
	s *runtime.Scheme
}

func (m fakeManager) GetClient() client.Client   { return m.c }
func (m fakeManager) GetScheme() *runtime.Scheme { return m.s }

// TestQuietConfigWrites runs crossplane-runtime's config reconciler through
// quietManager: the first count of a config's users is written, counting
// again with nothing changed writes nothing, a new user is written again.
func TestQuietConfigWrites(t *testing.T) {
	s := runtime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	gv := kubernetesv1alpha1.SchemeGroupVersion
	pc := &kubernetesv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "default"}}
	usage := func(name string) *kubernetesv1alpha1.ProviderConfigUsage {
		return &kubernetesv1alpha1.ProviderConfigUsage{ObjectMeta: metav1.ObjectMeta{
			Namespace: "team", Name: name,
			Labels:          map[string]string{xpv2.LabelKeyProviderName: "default", xpv2.LabelKeyProviderKind: "ProviderConfig"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gv.String(), Kind: "KubernetesProxy", Name: name, UID: types.UID(name), Controller: ptr.To(true)}},
		}}
	}
	writes := 0
	kube := fake.NewClientBuilder().WithScheme(s).WithObjects(pc, usage("a")).
		WithStatusSubresource(pc).
		WithInterceptorFuncs(interceptor.Funcs{
			// The manager's cache sets the kind, which the reconciler's
			// usage labels name; the fake client does not.
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if err := c.Get(ctx, key, obj, opts...); err != nil {
					return err
				}
				gvk, err := apiutil.GVKForObject(obj, s)
				if err != nil {
					return err
				}
				obj.GetObjectKind().SetGroupVersionKind(gvk)
				return nil
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				writes++
				return c.Update(ctx, obj, opts...)
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				writes++
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}).Build()
	r := providerconfig.NewReconciler(quietManager{Manager: fakeManager{c: kube, s: s}}, resource.ProviderConfigKinds{
		Config:    gv.WithKind("ProviderConfig"),
		Usage:     gv.WithKind("ProviderConfigUsage"),
		UsageList: gv.WithKind("ProviderConfigUsageList"),
	})
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: "default"}}
	count := func() int64 {
		got := &kubernetesv1alpha1.ProviderConfig{}
		if err := kube.Get(t.Context(), req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
		return got.Status.Users
	}
	steps := []struct {
		reason string
		before func()
		writes int
		users  int64
	}{
		{reason: "The first count adds the finalizer and writes the count.", writes: 2, users: 1},
		{reason: "Counting again with nothing changed writes nothing (was: two PUTs).", writes: 0, users: 1},
		{reason: "A new user is counted.", before: func() {
			if err := kube.Create(t.Context(), usage("b")); err != nil {
				t.Fatal(err)
			}
		}, writes: 1, users: 2},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		writes = 0
		if _, err := r.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(st.writes, writes); diff != "" {
			t.Errorf("\n%s\nwrites: -want, +got:\n%s", st.reason, diff)
		}
		if diff := cmp.Diff(st.users, count()); diff != "" {
			t.Errorf("\n%s\nusers: -want, +got:\n%s", st.reason, diff)
		}
	}
}
