/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"fmt"

	"github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
)

// ignoredSections warns about input meant for a backend the Composition does
// not compose: usually a Composition copied from another backend's.
func ignoredSections(in *v1alpha1.Input) []string {
	sections := []struct {
		backend v1alpha1.Backend
		set     bool
	}{
		{backend: v1alpha1.BackendKubernetes, set: in.Kubernetes != nil},
		{backend: v1alpha1.BackendGCP, set: in.GCP != nil},
		{backend: v1alpha1.BackendKVM, set: in.KVM != nil},
	}
	var w []string
	for _, s := range sections {
		if s.set && s.backend != in.Backend {
			w = append(w, fmt.Sprintf("the function input's %s section is ignored: the backend is %s", s.backend, in.Backend))
		}
	}
	return w
}
