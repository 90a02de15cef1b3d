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

// shared are the files and folders (their own .go files, tests aside) that
// serve every backend and so must name none: they iterate registry.Backends.
var shared = []string{
	"cmd/provider",
	"hack/dev",
	"internal/backend",
	"internal/backend/registry",
	"internal/controller",
	"internal/controller/config",
	"internal/controller/proxy",
	"internal/function",
	"internal/testenv/cluster/claims.go",
	"internal/testenv/cluster/packages.go",
	"internal/testenv/cluster/wired.go",
}

// registration are the shared files a new backend adds one line to, as
// docs/backends.md ("Adding a backend") lists them.
var registration = []string{
	"internal/backend/registry/registry.go", // its description
	"cmd/provider/backends.go",              // its controller side
}

// testDoubles are the shared files that list the backends' test doubles for
// the e2e suite and make dev: a backend without a test double is simply not
// run there.
var testDoubles = []string{
	"hack/dev/traffic.go",
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
		if slices.Contains(registration, rel) || slices.Contains(testDoubles, rel) {
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
// checklist of docs/backends.md names the registration files, and stays
// under six files.
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
	for _, f := range registration {
		if !strings.Contains(section, "`"+f+"`") {
			t.Errorf("the checklist of docs/backends.md does not name %s", f)
		}
	}
	files := 0
	for _, l := range strings.Split(section, "\n") {
		if len(l) > 2 && l[0] >= '1' && l[0] <= '9' && l[1] == '.' {
			files++
		}
	}
	if files == 0 || files >= 6 {
		t.Errorf("the checklist of docs/backends.md lists %d files a new backend touches; want 1 to 5", files)
	}
}
