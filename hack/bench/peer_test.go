/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestPeerObjects(t *testing.T) {
	type object struct{ name, kind, manifestName, manifestNamespace, config string }
	objs, err := peerObjects(7)
	if err != nil {
		t.Fatalf("peerObjects(7): %v", err)
	}
	got := make([]object, 0, len(objs))
	for _, u := range objs {
		if u.GroupVersionKind() != peerGVK || u.GetNamespace() != mrNamespace {
			t.Errorf("peerObjects(7): %s %s/%s, want a %s in %s", u.GroupVersionKind(), u.GetNamespace(), u.GetName(), peerGVK, mrNamespace)
		}
		m, _, _ := unstructured.NestedMap(u.Object, "spec", "forProvider", "manifest")
		mu := &unstructured.Unstructured{Object: m}
		config, _, _ := unstructured.NestedString(u.Object, "spec", "providerConfigRef", "name")
		got = append(got, object{u.GetName(), mu.GetKind(), mu.GetName(), mu.GetNamespace(), config})
	}
	// The POST baseline's four objects, under one name, in the peer's namespace.
	want := []object{
		{"peer-0007-configmap", "ConfigMap", "peer-0007", peerNamespace, peerConfig},
		{"peer-0007-secret", "Secret", "peer-0007", peerNamespace, peerConfig},
		{"peer-0007-deployment", "Deployment", "peer-0007", peerNamespace, peerConfig},
		{"peer-0007-service", "Service", "peer-0007", peerNamespace, peerConfig},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(object{})); diff != "" {
		t.Errorf("peerObjects(7): -want, +got:\n%s", diff)
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(objs[0].Object, "spec", "forProvider", "manifest", "metadata", "creationTimestamp"); ok {
		t.Errorf("peerObjects(7): the manifest holds the typed object's empty creationTimestamp")
	}
}

func TestPeerVersion(t *testing.T) {
	if got, want := peerVersion("/cache/tools/provider-kubernetes-v1.2.0/provider-kubernetes"), "v1.2.0"; got != want {
		t.Errorf("peerVersion: got %q, want %q", got, want)
	}
}
