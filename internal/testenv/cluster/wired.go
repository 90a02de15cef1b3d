/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// A Backend runs egress proxies; it is also the value of the Composition
// label egressproxy.io/backend.
type Backend string

// The backends.
const (
	BackendKubernetes Backend = "kubernetes"
	BackendGCP        Backend = "gcp"
	BackendKVM        Backend = "kvm"
)

// errParseBackends is returned when cmd/provider/backends.go cannot be read.
const errParseBackends = "cannot parse cmd/provider/backends.go"

// fieldOf maps the fields of controllers.Backends onto backends.
func fieldOf(name string) (Backend, bool) {
	switch name {
	case "Kubernetes":
		return BackendKubernetes, true
	case "GCP":
		return BackendGCP, true
	case "KVM":
		return BackendKVM, true
	}
	return "", false
}

// WiredBackends returns the backends that cmd/provider builds in: the fields
// set in the Backends literal of cmd/provider/backends.go. A backend that is
// not wired registers its controller anyway and its managed resources say
// the backend is not available, so tests of it cannot pass yet.
func WiredBackends() (map[Backend]bool, error) {
	return wiredIn(filepath.Join(testenv.RepoRoot(), "cmd", "provider", "backends.go"), nil)
}

// wiredIn parses Go source (src, or the file when src is nil).
func wiredIn(path string, src any) (map[Backend]bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, errors.Wrap(err, errParseBackends)
	}
	wired := map[Backend]bool{}
	set := func(field string, value ast.Expr) {
		if b, ok := fieldOf(field); ok && !isNil(value) {
			wired[b] = true
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CompositeLit:
			// controllers.Backends{Kubernetes: ...}
			if !isBackendsType(n.Type) {
				return true
			}
			for _, e := range n.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					if k, ok := kv.Key.(*ast.Ident); ok {
						set(k.Name, kv.Value)
					}
				}
			}
		case *ast.AssignStmt:
			// b.Kubernetes = ...
			for i, l := range n.Lhs {
				if sel, ok := l.(*ast.SelectorExpr); ok && i < len(n.Rhs) {
					set(sel.Sel.Name, n.Rhs[i])
				}
			}
		}
		return true
	})
	return wired, nil
}

func isBackendsType(e ast.Expr) bool {
	switch t := e.(type) {
	case *ast.SelectorExpr:
		return t.Sel.Name == "Backends"
	case *ast.Ident:
		return t.Name == "Backends"
	}
	return false
}

func isNil(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && strings.EqualFold(id.Name, "nil")
}
