/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// quietManager hands the managed reconciler a client whose status updates
// are skipped when they would change nothing. The reconciler of
// crossplane-runtime v2 calls Status().Update after every reconcile, also
// when Observe found the resource as it was: one PUT per resource per poll,
// which the API server answers without writing. Conditions keep their
// LastTransitionTime when nothing else changed (SetConditions), so an
// unchanged resource is equal to the cached one.
type quietManager struct {
	ctrl.Manager
}

func (m quietManager) GetClient() client.Client {
	return quietClient{Client: m.Manager.GetClient()}
}

type quietClient struct {
	client.Client
}

func (c quietClient) Status() client.SubResourceWriter {
	return quietStatus{SubResourceWriter: c.Client.Status(), reader: c.Client}
}

type quietStatus struct {
	client.SubResourceWriter
	reader client.Reader
}

// Update updates the status of obj unless obj equals what the reader (the
// manager's cache) holds at the same resource version.
func (s quietStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if len(opts) == 0 && unchanged(ctx, s.reader, obj) {
		return nil
	}
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func unchanged(ctx context.Context, r client.Reader, obj client.Object) bool {
	t := reflect.TypeOf(obj)
	if t.Kind() != reflect.Pointer {
		return false
	}
	cached, ok := reflect.New(t.Elem()).Interface().(client.Object)
	if !ok || r.Get(ctx, client.ObjectKeyFromObject(obj), cached) != nil {
		return false
	}
	return cached.GetResourceVersion() == obj.GetResourceVersion() && equality.Semantic.DeepEqual(cached, obj)
}
