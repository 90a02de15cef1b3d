/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"testing"

	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
)

// TestEveryBackendHasABench: make bench measures every backend of the
// provider by default, each through the bench its own file registers.
func TestEveryBackendHasABench(t *testing.T) {
	for _, b := range registry.Backends.Names() {
		if _, ok := benches[b]; !ok {
			t.Errorf("the %s backend has no bench: add hack/bench/%s.go with var _ = registerBench(...)", b, b)
		}
	}
}
