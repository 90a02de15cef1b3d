//go:build !linux

/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package exepages

// Release does nothing outside Linux, where the provider is only run for
// development.
func Release() (uintptr, error) { return 0, nil }
