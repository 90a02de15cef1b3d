/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"fmt"

	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
	"github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
)

// ignoredSections warns about input meant for a backend the Composition does
// not compose: usually a Composition copied from another backend's.
func ignoredSections(in *v1alpha1.Input) []string {
	var w []string
	for _, b := range registry.Backends {
		if in.Section(b.Name) != nil && b.Name != string(in.Backend) {
			w = append(w, fmt.Sprintf("the function input's %s section is ignored: the backend is %s", b.Name, in.Backend))
		}
	}
	return w
}
