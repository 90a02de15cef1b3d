/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
)

// TestConfigSpec shows that the spec of a config reads the same from
// either kind, typed or unstructured, and that the spec read is a value
// of its own.
func TestConfigSpec(t *testing.T) {
	spec := v1alpha1.ProviderConfigSpec{
		Credentials: v1alpha1.Credentials{
			Source:    v1alpha1.CredentialsSourceSecret,
			SecretRef: &commonv1alpha1.SecretKeySelector{SecretReference: commonv1alpha1.SecretReference{Name: "kubeconfig"}, Key: "config"},
		},
		AllowedNamespaces: []string{"proxies"},
	}
	pc := &v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "pc"}, Spec: *spec.DeepCopy()}
	cpc := &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "cpc"}, Spec: *spec.DeepCopy()}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pc)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]client.Object{
		"ProviderConfig":        pc,
		"ClusterProviderConfig": cpc,
		"Unstructured":          &unstructured.Unstructured{Object: u},
	}
	for name, obj := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := proxy.ConfigSpec[v1alpha1.ProviderConfigSpec](proxy.Config{Object: obj})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(spec, got); diff != "" {
				t.Errorf("ConfigSpec: -want, +got:\n%s", diff)
			}
			got.AllowedNamespaces[0] = "changed"
			got.Credentials.SecretRef.Name = "changed"
			again, _ := proxy.ConfigSpec[v1alpha1.ProviderConfigSpec](proxy.Config{Object: obj})
			if diff := cmp.Diff(spec, again); diff != "" {
				t.Errorf("changing the spec read changed the config: -want, +got:\n%s", diff)
			}
		})
	}
}

func BenchmarkConfigSpec(b *testing.B) {
	pc := &v1alpha1.ProviderConfig{Spec: v1alpha1.ProviderConfigSpec{AllowedNamespaces: []string{"proxies"}}}
	for b.Loop() {
		_, _ = proxy.ConfigSpec[v1alpha1.ProviderConfigSpec](proxy.Config{Object: pc})
	}
}
