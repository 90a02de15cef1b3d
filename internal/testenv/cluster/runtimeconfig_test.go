/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAppendItem(t *testing.T) {
	cases := map[string]struct {
		reason string
		m      map[string]any
		item   map[string]any
		want   map[string]any
	}{
		"Empty": {
			reason: "A missing list gets the item.",
			m:      map[string]any{},
			item:   map[string]any{"name": "a", "v": 1},
			want:   map[string]any{"l": []any{map[string]any{"name": "a", "v": 1}}},
		},
		"Appends": {
			reason: "Items of other names stay, in order.",
			m:      map[string]any{"l": []any{map[string]any{"name": "a"}}},
			item:   map[string]any{"name": "b"},
			want:   map[string]any{"l": []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}},
		},
		"Replaces": {
			reason: "An item of the same name is replaced, so a step run twice (an upgrade) adds nothing twice.",
			m:      map[string]any{"l": []any{map[string]any{"name": "a", "v": 1}, map[string]any{"name": "b"}}},
			item:   map[string]any{"name": "a", "v": 2},
			want:   map[string]any{"l": []any{map[string]any{"name": "b"}, map[string]any{"name": "a", "v": 2}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			appendItem(tc.m, "l", tc.item)
			if diff := cmp.Diff(tc.want, tc.m); diff != "" {
				t.Errorf("%s\nappendItem(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDeploymentTemplate(t *testing.T) {
	// Crossplane's DeploymentRuntimeConfig CRD requires a selector, and
	// the runtime merges a container named package-runtime into the
	// package's own.
	want := map[string]any{"spec": map[string]any{
		"selector": map[string]any{},
		"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "package-runtime", "args": []any{"--poll=5s", "--debug"}}},
		}},
	}}
	if diff := cmp.Diff(want, deploymentTemplate([]string{"--poll=5s", "--debug"})); diff != "" {
		t.Errorf("deploymentTemplate: -want, +got:\n%s", diff)
	}
}
