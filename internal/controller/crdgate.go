/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package controller

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/egressproxy/provider-egressproxy/internal/controller/phase"
)

// crdGate tells safe-start's gate which kinds an established CRD serves.
// It does what crossplane-runtime's customresourcesgate does, but its
// controller is made with the provider's options: customresourcesgate makes
// its own, whose work queue would be the one queue of the provider not in
// phase (internal/controller/phase), two more wake-ups a second for a
// controller that reconciles a handful of CRDs once.
type crdGate struct {
	gate controller.Gate
}

// setupCRDGate adds the gate's controller to mgr. The manager's cache keeps
// only the names and conditions of CRDs (customresourcesgate's
// TransformStripCRDSchema, set in cmd/provider).
func setupCRDGate(mgr ctrl.Manager, o controller.Options) error {
	// One worker: it reconciles a handful of CRDs, and every worker is an
	// idle goroutine for the provider's life.
	o.MaxConcurrentReconciles = 1
	return ctrl.NewControllerManagedBy(mgr).
		For(&apiextensionsv1.CustomResourceDefinition{}).
		Named("crd-gate").
		WithOptions(phase.Options(o, mgr.GetLogger())).
		Complete(reconcile.AsReconciler[*apiextensionsv1.CustomResourceDefinition](mgr.GetClient(), crdGate{gate: o.Gate}))
}

// Reconcile opens the gate of each served kind of an established CRD, and
// closes that of each of its kinds otherwise.
func (g crdGate) Reconcile(_ context.Context, crd *apiextensionsv1.CustomResourceDefinition) (ctrl.Result, error) {
	ready := established(crd) && crd.GetDeletionTimestamp().IsZero()
	for _, v := range crd.Spec.Versions {
		gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
		switch {
		case !ready:
			g.gate.Set(gvk, false)
		case v.Served:
			g.gate.Set(gvk, true)
		}
	}
	return ctrl.Result{}, nil
}

// openServed opens the gate of every kind of backends that the API server
// already serves, before the manager starts: the controllers of a backend
// whose CRDs exist at start are added with the manager's own, instead of
// after the gate's controller has started, synced and reconciled the CRDs.
// That took ~1 s of every start (two work queues started in phase, see
// internal/controller/phase, and a cache sync) before the first managed
// resource was reconciled. A served kind is one the API server's discovery
// lists, which it does once its CRD is established. A kind not found, or a
// discovery that fails, is left to the gate's controller.
func openServed(m meta.RESTMapper, g controller.Gate, backends []Backend) {
	for _, b := range backends {
		for _, gvk := range gvks(b.Description) {
			if _, err := m.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
				g.Set(gvk, true)
			}
		}
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
