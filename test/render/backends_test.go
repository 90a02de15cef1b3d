/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package render_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
)

// TestEveryBackendRendered: the render tests render every example claim
// and namespaced XR they find, with the Compositions of both
// Configurations, so a backend of the provider without them would go
// unrendered. Each backend has all four, and its Compositions compose it.
func TestEveryBackendRendered(t *testing.T) {
	for _, b := range registry.Backends.Names() {
		for _, p := range [][]string{
			{"examples", "composition", "claim-" + b + ".yaml"},
			{"examples", "namespaced", "egressproxy-" + b + ".yaml"},
		} {
			if _, err := os.Stat(repoPath(p...)); err != nil {
				t.Errorf("the %s backend has no %s: %v", b, filepath.Join(p...), err)
			}
		}
		for _, cfg := range []string{"configuration", "configuration-namespaced"} {
			path := repoPath("package", cfg, "composition-"+b+".yaml")
			if _, err := os.Stat(path); err != nil {
				t.Errorf("the %s backend has no Composition in package/%s: %v", b, cfg, err)
				continue
			}
			for _, d := range readDocs(t, path) {
				if got := str(d, "metadata", "labels", labelBackend); got != b {
					t.Errorf("package/%s/composition-%s.yaml: label %s is %q, want %q", cfg, b, labelBackend, got, b)
				}
				steps, _ := field(d, "spec", "pipeline").([]any)
				for _, s := range steps {
					if got := str(s.(map[string]any), "input", "backend"); got != b {
						t.Errorf("package/%s/composition-%s.yaml: step %s composes backend %q, want %q", cfg, b, str(s.(map[string]any), "step"), got, b)
					}
				}
			}
		}
	}
}
