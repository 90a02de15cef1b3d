/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"slices"
	"strings"
	"testing"
)

// TestDocumentedRuntimeEnv: make bench runs the provider with the memory
// limit the documented runtime sets (docs/bench.md's figures depend on it).
func TestDocumentedRuntimeEnv(t *testing.T) {
	env, err := documentedRuntimeEnv()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "GOMEMLIMIT=") }) {
		t.Errorf("documentedRuntimeEnv(): %s sets no GOMEMLIMIT, got %q", runtimeFile, env)
	}
}
