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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	kubernetesv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	kvmv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
)

func TestInUse(t *testing.T) {
	s := testScheme(t)
	secret := func(ns, name string, finalizers ...string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: finalizers}}
	}
	kpc := func(name, secret string, finalizers ...string) *kubernetesv1alpha1.ProviderConfig {
		return &kubernetesv1alpha1.ProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, Finalizers: finalizers},
			Spec: kubernetesv1alpha1.ProviderConfigSpec{Credentials: kubernetesv1alpha1.Credentials{
				Source: kubernetesv1alpha1.CredentialsSourceSecret,
				// The namespace of a namespaced config's reference is
				// ignored: it reads only from its own namespace.
				SecretRef: &commonv1alpha1.SecretKeySelector{SecretReference: commonv1alpha1.SecretReference{Name: secret, Namespace: "platform"}, Key: "kubeconfig"},
			}},
		}
	}
	objs := []client.Object{
		kpc("used", "kubeconfig", FinalizerConfigInUse, FinalizerInUse),
		kpc("unused", "other-kubeconfig", FinalizerConfigInUse),
		&kvmv1alpha1.ProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "kvm"},
			Spec: kvmv1alpha1.ProviderConfigSpec{URI: "test:///default", Credentials: kvmv1alpha1.Credentials{
				Source: kvmv1alpha1.CredentialsSourceSecret, SecretRef: &commonv1alpha1.SecretReference{Name: "ssh"},
			}},
		},
		&kubernetesv1alpha1.KubernetesProxy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web"},
			Spec: kubernetesv1alpha1.KubernetesProxySpec{ManagedResourceSpec: xpv2.ManagedResourceSpec{
				ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "used"},
			}},
		},
		// A ClusterProviderConfig of the same name is not the namespaced one.
		&kubernetesv1alpha1.KubernetesProxy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "shared"},
			Spec: kubernetesv1alpha1.KubernetesProxySpec{ManagedResourceSpec: xpv2.ManagedResourceSpec{
				ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "unused"},
			}},
		},
		// A resource of another namespace never holds this namespace's config.
		&kubernetesv1alpha1.KubernetesProxy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "web"},
			Spec: kubernetesv1alpha1.KubernetesProxySpec{ManagedResourceSpec: xpv2.ManagedResourceSpec{
				ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "unused"},
			}},
		},
		secret("team", "kubeconfig"),
		secret("team", "other-kubeconfig"),
		secret("team", "ssh"),
		secret("team", "stale", FinalizerSecretInUse),
		secret("team", "unrelated", "example.com/keep"),
		secret("platform", "kubeconfig"),
	}
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithIndex(&corev1.Secret{}, indexHeld, heldOf)
	for _, bk := range registry.Backends {
		mg, err := s.New(bk.Managed)
		if err != nil {
			t.Fatal(err)
		}
		b = b.WithIndex(mg.(client.Object), indexConfigRef, configRefOf)
	}
	kube := b.Build()
	r := &InUse{client: kube}
	for _, b := range registry.Backends {
		r.groups = append(r.groups, group{Description: b, scheme: s})
	}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "team"}}); err != nil {
		t.Fatal(err)
	}

	cases := map[string]struct {
		reason string
		obj    client.Object
		want   []string
	}{
		"UsedConfig":         {reason: "The finalizer earlier versions held a config with goes; FinalizerInUse, which Users keeps, stays.", obj: &kubernetesv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "used"}}, want: []string{FinalizerInUse}},
		"UnusedConfig":       {reason: "The finalizer of earlier versions goes from an unused config too.", obj: &kubernetesv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "unused"}}},
		"UsedSecret":         {reason: "The Secret of a namespaced config is held, whatever namespace the reference names.", obj: secret("team", "kubeconfig"), want: []string{FinalizerSecretInUse}},
		"UnusedConfigSecret": {reason: "The Secret of a config is held even while no resource uses the config.", obj: secret("team", "other-kubeconfig"), want: []string{FinalizerSecretInUse}},
		"OtherGroupSecret":   {reason: "Every group's configs count.", obj: secret("team", "ssh"), want: []string{FinalizerSecretInUse}},
		"StaleSecret":        {reason: "A Secret no config refers to any more is released.", obj: secret("team", "stale")},
		"UnrelatedSecret":    {reason: "Other finalizers are kept.", obj: secret("team", "unrelated"), want: []string{"example.com/keep"}},
		"OtherNamespace":     {reason: "A Secret in another namespace is never touched.", obj: secret("platform", "kubeconfig")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := kube.Get(context.Background(), client.ObjectKeyFromObject(tc.obj), tc.obj); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, tc.obj.GetFinalizers(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nfinalizers: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
