/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
)

// TestBackendsMatchAPIs keeps the two registration lines of a backend
// together: the controller side listed here and the description in
// registry.Backends, which the function, the harness and make dev read.
func TestBackendsMatchAPIs(t *testing.T) {
	got := make([]string, 0, len(backends))
	for _, b := range backends {
		d := b.Description()
		got = append(got, d.Name)
		want, ok := registry.Backends.Lookup(d.Name)
		if !ok {
			continue
		}
		if diff := cmp.Diff(want.Managed, d.Managed); diff != "" {
			t.Errorf("backend %s: managed kind in cmd/provider and apis differ: -apis, +cmd/provider:\n%s", d.Name, diff)
		}
	}
	if diff := cmp.Diff(registry.Backends.Names(), got); diff != "" {
		t.Errorf("cmd/provider/backends.go and registry.Backends must list the same backends in the same order: -apis, +cmd/provider:\n%s", diff)
	}
}
