/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"fmt"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// sizeOf returns the size a claim asks for. The XRD restricts and defaults
// size, so anything else means the XR skipped validation: compose a small
// proxy rather than none, and say so.
func sizeOf(s string) (string, []string) {
	switch s {
	case backend.SizeSmall, backend.SizeMedium, backend.SizeLarge:
		return s, nil
	case "":
		return backend.SizeSmall, nil
	default:
		return backend.SizeSmall, []string{fmt.Sprintf("unknown spec.size %q: composing a small proxy (sizes are small, medium and large)", s)}
	}
}
