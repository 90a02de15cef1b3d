/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package version holds the provider's version, set at build time with
// -ldflags "-X github.com/egressproxy/provider-egressproxy/internal/version.Version=...".
package version

// Version of the provider.
var Version = "v0.0.0-dev"
