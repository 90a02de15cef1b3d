/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1_test

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/egressproxy/provider-egressproxy/internal/backend/gcp/gcpdesc"
	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
	"github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
)

func TestSection(t *testing.T) {
	gcp := &gcpdesc.Defaults{Zone: "europe-west1-b"}
	cases := map[string]struct {
		reason  string
		in      *v1alpha1.Input
		backend string
		want    any
	}{
		"Set": {
			reason:  "The section named like the backend is returned as is.",
			in:      &v1alpha1.Input{GCP: gcp},
			backend: "gcp",
			want:    gcp,
		},
		"Absent": {
			reason:  "An absent section is nil, not a typed nil pointer.",
			in:      &v1alpha1.Input{GCP: gcp},
			backend: "kvm",
			want:    nil,
		},
		"Unknown": {
			reason:  "A name no field has has no section.",
			in:      &v1alpha1.Input{GCP: gcp},
			backend: "memory",
			want:    nil,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.in.Section(tc.backend)
			if got == nil && tc.want == nil {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nSection(%q): -want, +got:\n%s", tc.reason, tc.backend, diff)
			}
		})
	}
}

// TestEveryBackendHasASection: the function hands each backend the field
// of the input named like it, so a registered backend without one could
// never be configured by a Composition.
func TestEveryBackendHasASection(t *testing.T) {
	typ := reflect.TypeFor[v1alpha1.Input]()
	for _, b := range registry.Backends {
		found := false
		for i := range typ.NumField() {
			f := typ.Field(i)
			if tag := f.Tag.Get("json"); tag == b.Name+",omitempty" && f.Type.Kind() == reflect.Pointer {
				found = true
			}
		}
		if !found {
			t.Errorf("the function input has no section for the %s backend: add a field with JSON name %q of its descriptor's Defaults type to internal/function/input/v1alpha1/input.go", b.Name, b.Name)
		}
	}
}
