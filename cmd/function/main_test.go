/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"testing"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// TestEmbeddedRoots: the function image has no CA bundle; its TLS roots
// are in the binary.
func TestEmbeddedRoots(t *testing.T) { testenv.EmbeddedRoots(t) }
