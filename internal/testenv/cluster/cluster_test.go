/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
)

func TestManagedGVK(t *testing.T) {
	cases := map[string]struct {
		reason string
		b      Backend
		want   schema.GroupVersionKind
	}{
		"Known": {
			reason: "A backend's managed resource kind is the one its description names.",
			b:      Backend(registry.Backends[0].Name),
			want:   registry.Backends[0].Managed,
		},
		"Unknown": {
			reason: "An unknown backend has no managed resource kind.",
			b:      "podman",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ManagedGVK(tc.b)); diff != "" {
				t.Errorf("\n%s\nManagedGVK(%q): -want, +got:\n%s", tc.reason, tc.b, diff)
			}
		})
	}
}

func TestDoublesAreBackends(t *testing.T) {
	for b := range doubles {
		if _, ok := registry.Backends.Lookup(string(b)); !ok {
			t.Errorf("the harness has a test double of %q, which registry.Backends does not list", b)
		}
	}
}
