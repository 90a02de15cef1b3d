/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	controllers "github.com/egressproxy/provider-egressproxy/internal/controller"
)

// backends returns the backends built into this provider binary.
func backends() controllers.Backends {
	return controllers.Backends{}
}
