/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package config

import (
	"context"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/providerconfig"

	kubernetesv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
)

func proxyUsing(ns, name, kind, config string) *kubernetesv1alpha1.KubernetesProxy {
	return &kubernetesv1alpha1.KubernetesProxy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kubernetesv1alpha1.KubernetesProxySpec{ManagedResourceSpec: xpv2.ManagedResourceSpec{
			ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: kind, Name: config},
		}},
	}
}

// TestUsers counts the users of a ProviderConfig and of a
// ClusterProviderConfig from the index of managed resources, step by step:
// each step changes the world, reconciles both configs, and checks what was
// written and what the configs hold.
func TestUsers(t *testing.T) {
	s := testScheme(t)
	pc := &kubernetesv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "default"}}
	cpc := &kubernetesv1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	writes := 0
	count := func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
		writes++
		return c.Update(ctx, obj, opts...)
	}
	kube := fakeKube(t, s, interceptor.Funcs{
		Update: count,
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			writes++
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}, pc, cpc,
		proxyUsing("team", "web", "ProviderConfig", "default"),
		// A namespaced config is not used from another namespace, and a
		// ClusterProviderConfig of the same name is another config.
		proxyUsing("other", "web", "ProviderConfig", "default"),
		proxyUsing("other", "api", "ClusterProviderConfig", "default"))
	events := record.NewFakeRecorder(10)
	g := kubernetesGroup(t, s)
	configs := []struct {
		r   *Users
		req reconcile.Request
		obj interface {
			client.Object
			GetUsers() int64
		}
	}{
		{NewUsers(kube, g, g.ProviderConfig(), event.NewAPIRecorder(events)), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: "default"}}, &kubernetesv1alpha1.ProviderConfig{}},
		{NewUsers(kube, g, g.ClusterProviderConfig(), event.NewAPIRecorder(events)), reconcile.Request{NamespacedName: types.NamespacedName{Name: "default"}}, &kubernetesv1alpha1.ClusterProviderConfig{}},
	}
	type state struct {
		Writes     int
		Users      []int64
		Finalizers [][]string
		Events     int
	}
	steps := []struct {
		reason string
		before func(t *testing.T)
		want   state
	}{
		{
			reason: "The first count holds each config and writes its count: its own namespace's user for the ProviderConfig, every namespace's for the ClusterProviderConfig.",
			want:   state{Writes: 4, Users: []int64{1, 1}, Finalizers: [][]string{{FinalizerInUse}, {FinalizerInUse}}},
		},
		{
			reason: "Counting again with nothing changed writes nothing.",
			want:   state{Writes: 0, Users: []int64{1, 1}, Finalizers: [][]string{{FinalizerInUse}, {FinalizerInUse}}},
		},
		{
			reason: "A new user is counted, with one status write.",
			before: func(t *testing.T) {
				if err := kube.Create(t.Context(), proxyUsing("team", "api", "ClusterProviderConfig", "default")); err != nil {
					t.Fatal(err)
				}
			},
			want: state{Writes: 1, Users: []int64{1, 2}, Finalizers: [][]string{{FinalizerInUse}, {FinalizerInUse}}},
		},
		{
			reason: "A config deleted while in use keeps its finalizer, says why once, and is not deleted.",
			before: func(t *testing.T) {
				if err := kube.Delete(t.Context(), pc.DeepCopy()); err != nil {
					t.Fatal(err)
				}
			},
			want: state{Writes: 1, Users: []int64{1, 2}, Finalizers: [][]string{{FinalizerInUse}, {FinalizerInUse}}, Events: 1},
		},
		{
			reason: "Blocking again says nothing new.",
			want:   state{Writes: 0, Users: []int64{1, 2}, Finalizers: [][]string{{FinalizerInUse}, {FinalizerInUse}}},
		},
		{
			reason: "Once its last user is gone, the deleted config is released (and so goes).",
			before: func(t *testing.T) {
				if err := kube.Delete(t.Context(), proxyUsing("team", "web", "", "")); err != nil {
					t.Fatal(err)
				}
			},
			want: state{Writes: 1, Users: []int64{-1, 2}, Finalizers: [][]string{nil, {FinalizerInUse}}},
		},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before(t)
		}
		writes = 0
		got := state{}
		for _, c := range configs {
			if _, err := c.r.Reconcile(t.Context(), c.req); err != nil {
				t.Fatal(err)
			}
		}
		got.Writes = writes
		for _, c := range configs {
			if err := kube.Get(t.Context(), c.req.NamespacedName, c.obj); err != nil {
				got.Users = append(got.Users, -1)
				got.Finalizers = append(got.Finalizers, nil)
				continue
			}
			got.Users = append(got.Users, c.obj.GetUsers())
			got.Finalizers = append(got.Finalizers, c.obj.GetFinalizers())
		}
		got.Events = len(events.Events)
		for len(events.Events) > 0 {
			<-events.Events
		}
		if diff := cmp.Diff(st.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("\n%s\n-want, +got:\n%s", st.reason, diff)
		}
	}
	got := &kubernetesv1alpha1.ClusterProviderConfig{}
	if err := kube.Get(t.Context(), types.NamespacedName{Name: "default"}, got); err != nil {
		t.Fatal(err)
	}
	if c := got.GetCondition(providerconfig.TypeTerminating); c.Status == corev1.ConditionTrue {
		t.Errorf("a config in use and not deleted must not say it is terminating: %+v", c)
	}
}
