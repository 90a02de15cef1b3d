/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestKubernetesCompositions checks that the real node's Compositions are
// the packages' kubernetes ones, guardrails and all, with only the image
// set.
func TestKubernetesCompositions(t *testing.T) {
	comps, err := KubernetesCompositions("egressproxy.local/squid:test")
	if err != nil {
		t.Fatalf("KubernetesCompositions: %v", err)
	}
	names := map[string]bool{}
	for _, u := range comps {
		names[u.GetName()] = true
		steps, _, _ := unstructured.NestedSlice(u.Object, "spec", "pipeline")
		if len(steps) != 1 {
			t.Fatalf("%s: want one pipeline step, got %d", u.GetName(), len(steps))
		}
		step, _ := steps[0].(map[string]any)
		got, _, _ := unstructured.NestedString(step, "input", "kubernetes", "image")
		if diff := cmp.Diff("egressproxy.local/squid:test", got); diff != "" {
			t.Errorf("%s: image: -want, +got:\n%s", u.GetName(), diff)
		}
		if _, ok, _ := unstructured.NestedMap(step, "input", "guardrails"); !ok && u.GetName() == "xegressproxies-kubernetes" {
			t.Errorf("%s: the shipped guardrails are gone", u.GetName())
		}
	}
	if !names["xegressproxies-kubernetes"] {
		t.Errorf("the claim API's kubernetes Composition is missing: got %v", names)
	}
}

// TestKVMSandboxCompositions checks that every kvm Composition of the
// packages gets the sandbox's input and keeps the rest.
func TestKVMSandboxCompositions(t *testing.T) {
	comps, err := KVMSandboxCompositions()
	if err != nil {
		t.Fatalf("KVMSandboxCompositions: %v", err)
	}
	if len(comps) == 0 {
		t.Fatal("no kvm Composition")
	}
	for _, u := range comps {
		steps, _, _ := unstructured.NestedSlice(u.Object, "spec", "pipeline")
		step, _ := steps[0].(map[string]any)
		got, _, _ := unstructured.NestedMap(step, "input", "kvm")
		if diff := cmp.Diff(kvmSandboxInput(), got); diff != "" {
			t.Errorf("%s: kvm input: -want, +got:\n%s", u.GetName(), diff)
		}
		if b, _, _ := unstructured.NestedString(step, "input", "backend"); b != string(BackendKVM) {
			t.Errorf("%s: backend %q", u.GetName(), b)
		}
	}
}
