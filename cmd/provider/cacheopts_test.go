/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// TestCacheOptionsSecrets shows which Secrets the manager's cache holds: all
// but those labelled as the provider's own (the kubernetes backend's in a
// target cluster that is the control plane, the provider's key).
func TestCacheOptionsSecrets(t *testing.T) {
	o, err := cacheOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	var sel labels.Selector
	for obj, by := range o.ByObject {
		if _, ok := obj.(*corev1.Secret); ok {
			sel = by.Label
		}
	}
	if sel == nil {
		t.Fatal("cacheOptions: no label selector for Secrets: the cache holds every Secret")
	}
	cases := map[string]struct {
		labels map[string]string
		held   bool
	}{
		"Unlabelled":           {labels: nil, held: true},
		"OtherLabels":          {labels: map[string]string{"team": "a"}, held: true},
		"AnotherManager":       {labels: map[string]string{backend.KubernetesLabelKeys.ManagedBy: "someone-else"}, held: true},
		"KubernetesBackendOwn": {labels: map[string]string{backend.KubernetesLabelKeys.ManagedBy: backend.ManagedByValue}, held: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := sel.Matches(labels.Set(tc.labels)); got != tc.held {
				t.Errorf("selector %q matches labels %v: %t, want %t", sel, tc.labels, got, tc.held)
			}
		})
	}
}
