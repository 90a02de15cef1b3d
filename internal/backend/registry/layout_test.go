/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package registry_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// Package names that many packages may share: commands, and the versions
// of API groups (Kubernetes' convention: apis/<group>/v1alpha1).
var (
	sharedPackageNames = []string{"main"}
	apiVersion         = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)
)

// TestNoTwoPackagesShareAName: a plug-in is read by its package name
// (registry.Backends, gcpdesc.Backend), which must then say which package
// it is without looking at the import path.
func TestNoTwoPackagesShareAName(t *testing.T) {
	dirs := map[string][]string{}
	for dir, name := range packages(t, testenv.RepoRoot()) {
		if slices.Contains(sharedPackageNames, name) || apiVersion.MatchString(name) {
			continue
		}
		dirs[name] = append(dirs[name], dir)
	}
	for name, ds := range dirs {
		if len(ds) > 1 {
			slices.Sort(ds)
			t.Errorf("%d packages are named %s: %s", len(ds), name, strings.Join(ds, ", "))
		}
	}
}

// TestAPIsImportNothingInternal: the API types are what other modules
// (a Configuration's tests, a platform team's tooling) import, so they may
// depend only on other API packages and external modules.
func TestAPIsImportNothingInternal(t *testing.T) {
	root := testenv.RepoRoot()
	files := goFiles(t, filepath.Join(root, "apis"))
	if len(files) == 0 {
		t.Fatal("no Go files under apis/")
	}
	for _, path := range files {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(p, module); ok && !strings.HasPrefix(rest, "apis/") {
				t.Errorf("%s imports %s: apis/ may import only apis/ and external modules", rel, p)
			}
		}
	}
}

// packages returns the package name of every folder of the module with Go
// files, tests' own packages (name_test) aside, by folder relative to root.
func packages(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, path := range goFiles(t, root) {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		name := f.Name.Name
		if strings.HasSuffix(path, "_test.go") && strings.HasSuffix(name, "_test") {
			continue
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		out[dir] = name
	}
	return out
}

// goFiles returns the .go files under root, but for testdata, hidden and
// build output folders, which the go tool ignores too.
func goFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		n := d.Name()
		if d.IsDir() {
			if path != root && (n == "testdata" || n == "vendor" || n == "_output" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(n, ".go") {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
