/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// reconcilerAnnotations are written by the managed reconciler around Create.
// It requeues explicitly after each of those writes, so the watch event of
// the write is a second, redundant reconcile. crossplane-runtime's
// DesiredStateChanged ignores pending and failed; succeeded is the write
// after every successful Create, one extra reconcile per new proxy.
var reconcilerAnnotations = []string{
	meta.AnnotationKeyExternalCreatePending,
	meta.AnnotationKeyExternalCreateSucceeded,
	meta.AnnotationKeyExternalCreateFailed,
}

// desiredStateChanged passes a change of spec (generation), labels or
// annotations a user sets, and drops the provider's own bookkeeping: the
// reconciler's create annotations, and the external name when it is first
// set (the name initializer's value, written with the create-pending
// annotation). A changed external name still passes.
func desiredStateChanged() predicate.Predicate {
	return predicate.Or(
		predicate.GenerationChangedPredicate{},
		predicate.LabelChangedPredicate{},
		predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return false
			}
			return userAnnotationsChanged(e.ObjectOld, e.ObjectNew)
		}},
	)
}

func userAnnotationsChanged(old, cur client.Object) bool {
	oa, na := old.GetAnnotations(), cur.GetAnnotations()
	_, hadName := oa[meta.AnnotationKeyExternalName]
	ignored := func(k string) bool {
		return slices.Contains(reconcilerAnnotations, k) || (k == meta.AnnotationKeyExternalName && !hadName)
	}
	for k, v := range na {
		if ov, ok := oa[k]; (!ok || ov != v) && !ignored(k) {
			return true
		}
	}
	for k := range oa {
		if _, ok := na[k]; !ok && !ignored(k) {
			return true
		}
	}
	return false
}
