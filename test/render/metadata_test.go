/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package render_test

import (
	"regexp"
	"strings"
	"testing"
)

// TestPackageMetadata checks every package carries the metadata Crossplane's
// package managers and registries show, as provider-kubernetes does: a
// maintainer with a contact, the source, the license, a description and a
// readme.
func TestPackageMetadata(t *testing.T) {
	maintainer := regexp.MustCompile(`^[^<>]+ <[^<>\s]+>$`)
	for _, part := range []string{"provider", "function", "configuration", "configuration-namespaced"} {
		t.Run(part, func(t *testing.T) {
			meta := readDocs(t, repoPath("package", part, "crossplane.yaml"))[0]
			a, _ := field(meta, "metadata", "annotations").(map[string]any)
			get := func(k string) string { s, _ := a[k].(string); return strings.TrimSpace(s) }
			if m := get("meta.crossplane.io/maintainer"); !maintainer.MatchString(m) {
				t.Errorf("meta.crossplane.io/maintainer %q: want a name and a contact, Name <contact>", m)
			}
			if got, want := get("meta.crossplane.io/source"), "github.com/egressproxy/provider-egressproxy"; got != want {
				t.Errorf("meta.crossplane.io/source %q, want %q", got, want)
			}
			if got := get("meta.crossplane.io/license"); got != "Apache-2.0" {
				t.Errorf("meta.crossplane.io/license %q, want Apache-2.0", got)
			}
			for _, k := range []string{"meta.crossplane.io/description", "meta.crossplane.io/readme", "friendly-name.meta.crossplane.io"} {
				if get(k) == "" {
					t.Errorf("no %s", k)
				}
			}
		})
	}
}
