/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPruneEmpty(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     map[string]any
		want   map[string]any
	}{
		"TypedLeftovers": {
			reason: "Nulls and empty maps go, also when emptied by pruning.",
			in: map[string]any{
				"metadata": map[string]any{"name": "x", "creationTimestamp": nil},
				"spec":     map[string]any{"template": map[string]any{"metadata": map[string]any{"creationTimestamp": nil}}},
				"status":   map[string]any{},
			},
			want: map[string]any{"metadata": map[string]any{"name": "x"}},
		},
		"Values": {
			reason: "Zero numbers, empty strings and false are values, not empty.",
			in:     map[string]any{"replicas": int64(0), "s": "", "b": false, "l": []any{}},
			want:   map[string]any{"replicas": int64(0), "s": "", "b": false},
		},
		"ListItems": {
			reason: "List items are pruned but stay in place.",
			in:     map[string]any{"containers": []any{map[string]any{"name": "a", "resources": map[string]any{}}, map[string]any{}}},
			want:   map[string]any{"containers": []any{map[string]any{"name": "a"}, map[string]any{}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, pruneEmpty(tc.in)); diff != "" {
				t.Errorf("%s\npruneEmpty: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestToApply(t *testing.T) {
	for _, o := range kubeObjects("ns", "x") {
		u, err := toApply(o)
		if err != nil {
			t.Fatalf("toApply(%T): %v", o, err)
		}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			t.Errorf("toApply(%T): want apiVersion and kind, got %q %q", o, u.GetAPIVersion(), u.GetKind())
		}
		if _, ok := kubeResources[u.GetKind()]; !ok {
			t.Errorf("toApply(%T): kind %q has no resource in kubeResources", o, u.GetKind())
		}
		if _, ok := u.Object["status"]; ok {
			t.Errorf("toApply(%T): want no status, got %v", o, u.Object["status"])
		}
	}
}
