/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package render_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// A servedResource is one resource kubectl discovers once both
// Configurations and the Provider are installed.
type servedResource struct {
	source     string // where it is defined, for messages
	group      string
	kind       string
	plural     string
	singular   string
	shortNames []string
	categories []string
	// ours marks the resources an app team types: the claim, the XR and
	// the namespaced XR. Their names must each name one resource; the
	// provider's ProviderConfig kinds share names across groups as every
	// Crossplane provider's do, and the docs name those with their group.
	ours bool
}

// names are the words kubectl resolves to this resource without a group.
func (r servedResource) names() []string {
	var out []string
	for _, n := range append([]string{strings.ToLower(r.kind), r.plural, r.singular}, r.shortNames...) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func (r servedResource) String() string { return r.source + " " + r.kind + "." + r.group }

// strs reads a list of strings from a parsed YAML document.
func strs(o map[string]any, path ...string) []string {
	l, _ := field(o, path...).([]any)
	out := make([]string, 0, len(l))
	for _, v := range l {
		out = append(out, v.(string))
	}
	return out
}

// xrdResources returns the resources an XRD serves: the composite resource
// and, if it offers one, the claim. Crossplane copies names and claimNames
// into the CRDs it makes; a CRD's singular defaults to its kind in lower case.
func xrdResources(t *testing.T, path string) []servedResource {
	t.Helper()
	xrd := readDocs(t, path)[0]
	group := str(xrd, "spec", "group")
	var out []servedResource
	for _, n := range []string{"names", "claimNames"} {
		names, ok := field(xrd, "spec", n).(map[string]any)
		if !ok {
			continue
		}
		r := servedResource{
			source:     filepath.Base(filepath.Dir(path)) + " " + n,
			group:      group,
			kind:       str(names, "kind"),
			plural:     str(names, "plural"),
			singular:   str(names, "singular"),
			shortNames: strs(names, "shortNames"),
			categories: strs(names, "categories"),
			ours:       true,
		}
		if r.singular == "" {
			r.singular = strings.ToLower(r.kind)
		}
		out = append(out, r)
	}
	return out
}

// servedResources returns what both Configurations and the Provider serve.
func servedResources(t *testing.T) []servedResource {
	t.Helper()
	rs := append(xrdResources(t, repoPath("package", "configuration", "xrd.yaml")),
		xrdResources(t, repoPath("package", "configuration-namespaced", "xrd.yaml"))...)
	crds, _ := filepath.Glob(repoPath("package", "provider", "crds", "*.yaml"))
	if len(crds) == 0 {
		t.Fatal("no CRDs in package/provider/crds")
	}
	for _, f := range crds {
		crd := readDocs(t, f)[0]
		rs = append(rs, servedResource{
			source:     filepath.Base(f),
			group:      str(crd, "spec", "group"),
			kind:       str(crd, "spec", "names", "kind"),
			plural:     str(crd, "spec", "names", "plural"),
			singular:   str(crd, "spec", "names", "singular"),
			shortNames: strs(crd, "spec", "names", "shortNames"),
			categories: strs(crd, "spec", "names", "categories"),
		})
	}
	return rs
}

// TestNamesUnambiguous checks kubectl resolves every name of the claim, the
// XR and the namespaced XR to one resource with both Configurations
// installed: no other served resource has the same kind, plural, singular
// or short name (kubectl would silently pick one group), and no category has
// it (kubectl expands a category before it looks for a resource, so
// `kubectl get <category> <name>` fails with "you must specify only one
// resource").
func TestNamesUnambiguous(t *testing.T) {
	rs := servedResources(t)
	categories := map[string][]string{}
	for _, r := range rs {
		for _, c := range r.categories {
			categories[c] = append(categories[c], r.String())
		}
	}
	for i, r := range rs {
		if !r.ours {
			continue
		}
		for _, n := range r.names() {
			if in, ok := categories[n]; ok {
				t.Errorf("%s: %q is also a category of %s; kubectl get %s expands the category", r, n, strings.Join(in, ", "), n)
			}
			for j, o := range rs {
				if i == j || (o.ours && j < i) {
					continue // each pair of ours once
				}
				for _, on := range o.names() {
					if n == on {
						t.Errorf("%s and %s share the name %q: kubectl get %s resolves to one of them", r, o, n, n)
					}
				}
			}
		}
	}
}

// kubectlResource matches the resource argument of the kubectl (and
// crossplane beta trace) commands in the docs: the first word after the
// verb and its flags.
var kubectlResource = regexp.MustCompile(`(?:kubectl\s+(?:get|describe|annotate|label|delete|edit|wait|explain)|crossplane\s+beta\s+trace)((?:\s+-{1,2}[a-z-]+(?:[= ][^\s-]\S*)?)*)\s+([a-z][a-z0-9.,/-]*)`)

// TestDocumentedNamesResolve checks every resource a kubectl command in the
// docs names that is ours (it mentions egress or proxy) resolves to exactly
// one served resource with both Configurations installed.
func TestDocumentedNamesResolve(t *testing.T) {
	rs := servedResources(t)
	categories := map[string]bool{}
	for _, r := range rs {
		for _, c := range r.categories {
			categories[c] = true
		}
	}
	docs, _ := filepath.Glob(repoPath("docs", "*.md"))
	docs = append(docs, repoPath("README.md"))
	checked := 0
	for _, f := range docs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range kubectlResource.FindAllStringSubmatch(string(b), -1) {
			arg := m[2]
			if i := strings.Index(arg, "/"); i >= 0 {
				arg = arg[:i] // kubectl get kind/name
			}
			for _, w := range strings.Split(arg, ",") {
				if !strings.Contains(w, "egress") && !strings.Contains(w, "proxy") && !strings.Contains(w, "proxies") {
					continue // Kubernetes' or Crossplane's own
				}
				checked++
				var matches []string
				for _, r := range rs {
					if resolves(r, w) {
						matches = append(matches, r.String())
					}
				}
				sort.Strings(matches)
				switch {
				case categories[w] && len(matches) > 0:
					t.Errorf("%s: %q: %q is a category as well as a name of %v; kubectl expands the category", filepath.Base(f), m[0], w, matches)
				case categories[w]:
					// A category lists several kinds; it names no one resource.
				case len(matches) != 1:
					t.Errorf("%s: %q names %d served resources, want 1: %v", filepath.Base(f), m[0], len(matches), matches)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no kubectl command in the docs names one of our resources: is the regexp still right?")
	}
}

// resolves reports whether kubectl resolves the word w to r: a name of r
// alone, or its plural, singular or kind followed by its group (or a
// suffix of its group's version-qualified form, which kubectl does not
// accept, so only the full group counts).
func resolves(r servedResource, w string) bool {
	name, group, qualified := strings.Cut(w, ".")
	if !qualified {
		for _, n := range r.names() {
			if w == n {
				return true
			}
		}
		return false
	}
	if group != r.group {
		return false
	}
	return name == r.plural || name == r.singular || name == strings.ToLower(r.kind)
}
