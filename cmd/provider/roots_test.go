/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"testing"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// TestEmbeddedRoots: the provider image has no CA bundle, yet the provider
// calls Compute Engine and Google's OAuth endpoints over TLS: its roots
// are in the binary.
func TestEmbeddedRoots(t *testing.T) { testenv.EmbeddedRoots(t) }
