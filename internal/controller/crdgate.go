/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package controller

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"k8s.io/apimachinery/pkg/api/meta"
)

// openServed opens the gate of every kind of backends that the API server
// already serves, before the manager starts: the controllers of a backend
// whose CRDs exist at start are added with the manager's own, instead of
// after the gate's controller (crossplane-runtime's customresourcesgate) has
// started, synced and reconciled the CRDs. That took ~1 s of every start
// before the first managed resource was reconciled. A served kind is one the
// API server's discovery lists, which it does once its CRD is established. A
// kind not found, or a discovery that fails, is left to the gate's
// controller.
func openServed(m meta.RESTMapper, g controller.Gate, backends []Backend) {
	for _, b := range backends {
		for _, gvk := range gvks(b.Description) {
			if _, err := m.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
				g.Set(gvk, true)
			}
		}
	}
}
