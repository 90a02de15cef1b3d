/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ProviderConfigName is the ClusterProviderConfig every Composition names.
const ProviderConfigName = "default"

// adaptComposition applies adapt to the input of every pipeline step of a
// Composition whose input is of backend b, and reports whether there was
// one.
func adaptComposition(u *unstructured.Unstructured, b Backend, adapt func(input map[string]any) error) (bool, error) {
	if u.GetKind() != "Composition" {
		return false, nil
	}
	steps, _, _ := unstructured.NestedSlice(u.Object, "spec", "pipeline")
	found := false
	for i, st := range steps {
		step, _ := st.(map[string]any)
		input, _ := step["input"].(map[string]any)
		if input == nil || input["backend"] != string(b) {
			continue
		}
		if err := adapt(input); err != nil {
			return false, err
		}
		steps[i], found = step, true
	}
	if !found {
		return false, nil
	}
	return true, unstructured.SetNestedSlice(u.Object, steps, "spec", "pipeline")
}
