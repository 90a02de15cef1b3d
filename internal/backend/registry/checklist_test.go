/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package registry_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

const module = "github.com/egressproxy/provider-egressproxy/"

// shared are the files and folders (their own .go files, tests aside, or
// the file named) that serve every backend and so must name none: they
// iterate registry.Backends, and the harness's and suites' registrations.
var shared = []string{
	"cmd/provider",
	"hack/dev",
	"internal/backend",
	"internal/backend/registry",
	"internal/controller",
	"internal/controller/config",
	"internal/controller/proxy",
	"internal/function",
	"internal/policy/backends.go",
	"internal/testenv/cluster/claims.go",
	"internal/testenv/cluster/doubles.go",
	"internal/testenv/cluster/packages.go",
	"internal/testenv/cluster/provider.go",
	"internal/testenv/cluster/wired.go",
	"test/crash/crash_test.go",
	"test/crash/harness_test.go",
	"test/crash/target_test.go",
	"test/e2e/e2e_suite_test.go",
	"test/render/backends_test.go",
}

// registration are the shared files a new backend edits, as
// docs/backends.md ("Adding a backend") lists them: one line or one field
// each.
var registration = []string{
	"internal/backend/registry/registry.go",     // its description
	"cmd/provider/backends.go",                  // its controller side
	"internal/function/input/v1alpha1/input.go", // its value of the backend enum and its section
	"internal/testenv/cluster/cluster.go",       // a handle on its test double, if tests need one
	"internal/testenv/cluster/tools.go",         // the build of its test double's binary, if any
}

// ownFiles are the files a new backend adds to shared folders, named after
// it (<name>), each registering it with what iterates the backends there.
var ownFiles = []string{
	"internal/testenv/cluster/<name>.go", // its test double: registerDouble
	"test/e2e/<name>_test.go",            // describeBackend, registerHealth
	"test/crash/<name>_test.go",          // registerTarget
	"hack/bench/<name>.go",               // registerBench
	"package/configuration/composition-<name>.yaml",
	"package/configuration-namespaced/composition-<name>.yaml",
	"examples/composition/claim-<name>.yaml",
	"examples/namespaced/egressproxy-<name>.yaml",
}

// allowedIdentifiers name no backend, though they contain a backend's name.
var allowedIdentifiers = []string{
	// The syntax of Kubernetes label keys, which objects in the control
	// plane use whatever the backend.
	"KubernetesLabelKeys",
}

// TestNoSharedFileNamesABackend keeps the "Adding a backend" checklist of
// docs/backends.md honest: outside the registration lines, no shared file
// imports a backend's packages or names a backend, its managed resource
// kind or its API group in code (comments may).
func TestNoSharedFileNamesABackend(t *testing.T) {
	root := testenv.RepoRoot()
	terms := backendTerms(t, root)
	for _, path := range sharedFiles(t, root) {
		rel, _ := filepath.Rel(root, path)
		if slices.Contains(registration, rel) {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if backendPackage(p) {
				t.Errorf("%s imports %s, a backend's package: iterate registry.Backends instead, or register the backend in %s", rel, p, strings.Join(registration, " or "))
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var word string
			switch n := n.(type) {
			case *ast.ImportSpec:
				return false
			case *ast.Ident:
				if slices.Contains(allowedIdentifiers, n.Name) {
					return true
				}
				word = n.Name
			case *ast.BasicLit:
				if n.Kind != token.STRING {
					return true
				}
				word = n.Value
			default:
				return true
			}
			for _, term := range terms {
				if strings.Contains(strings.ToLower(word), term) {
					t.Errorf("%s names the backend term %q in %s", rel, term, word)
				}
			}
			return true
		})
	}
}

// backendTerms are the backends' names, managed resource kinds and API
// groups, and the names of their packages, in lower case.
func backendTerms(t *testing.T, root string) []string {
	t.Helper()
	var terms []string
	for _, b := range registry.Backends {
		terms = append(terms, strings.ToLower(b.Name), strings.ToLower(b.Managed.Kind), strings.ToLower(b.Managed.Group))
	}
	for _, pattern := range []string{"internal/backend/*/*desc", "internal/controller/*proxy"} {
		dirs, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dirs {
			name := filepath.Base(d)
			switch name {
			case filepath.Base(filepath.Dir(d)) + "desc":
				name = filepath.Base(filepath.Dir(d))
			case "proxy":
				// The controller side every backend shares.
				continue
			}
			terms = append(terms, strings.ToLower(name))
		}
	}
	slices.Sort(terms)
	return slices.Compact(terms)
}

// backendPackage reports whether an import path is a backend's own package:
// its API group, its implementation or its controller side.
func backendPackage(p string) bool {
	rest, ok := strings.CutPrefix(p, module)
	if !ok {
		return false
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) >= 3 && parts[0] == "apis":
		return parts[1] != "common"
	case len(parts) >= 3 && parts[0] == "internal" && parts[1] == "backend":
		return parts[2] != "registry"
	case len(parts) >= 3 && parts[0] == "internal" && parts[1] == "controller":
		return !slices.Contains(sharedControllerPackages, parts[2])
	}
	return false
}

// sharedControllerPackages are the packages of internal/controller that
// every backend shares; the others are a backend's controller side.
var sharedControllerPackages = []string{"config", "phase", "proxy"}

// sharedFiles returns the .go files, tests aside, of shared.
func sharedFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for _, s := range shared {
		path := filepath.Join(root, s)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.IsDir() {
			out = append(out, path)
			continue
		}
		files, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				out = append(out, f)
			}
		}
	}
	return out
}

// TestChecklistNamesRegistration checks that the "Adding a backend"
// checklist of docs/backends.md numbers exactly the shared files a new
// backend edits, says how many, and names the files of its own it adds.
func TestChecklistNamesRegistration(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "backends.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Adding a backend\n")
	if !ok {
		t.Fatal("docs/backends.md has no section ## Adding a backend")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var numbered []string
	for _, l := range strings.Split(section, "\n") {
		if len(l) > 2 && l[0] >= '1' && l[0] <= '9' && l[1] == '.' {
			numbered = append(numbered, l)
		}
	}
	if len(numbered) != len(registration) {
		t.Errorf("the checklist of docs/backends.md numbers %d shared files a new backend edits; want the %d of registration", len(numbered), len(registration))
	}
	for i, f := range registration {
		if i < len(numbered) && !strings.Contains(numbered[i], "`"+f+"`") {
			t.Errorf("item %d of the checklist of docs/backends.md does not name %s: %s", i+1, f, numbered[i])
		}
	}
	if count := numberWords[len(registration)]; !strings.Contains(section, "edits "+count+" shared files") {
		t.Errorf("the checklist of docs/backends.md does not say it edits %s shared files", count)
	}
	if len(registration) > 6 {
		t.Errorf("a new backend edits %d shared files; issue 37 allows at most 6", len(registration))
	}
	for _, f := range ownFiles {
		if !strings.Contains(strings.Join(strings.Fields(section), " "), "`"+f+"`") {
			t.Errorf("the checklist of docs/backends.md does not name %s, a file a new backend adds", f)
		}
	}
}

var numberWords = []string{"no", "one", "two", "three", "four", "five", "six"}
