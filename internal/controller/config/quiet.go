/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package config

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// quietManager hands crossplane-runtime's config reconciler a client that
// does not send what changes nothing. That reconciler updates the config
// (to add its finalizer) and its status (the count of users) on every
// reconcile, also when both are as they were: two PUTs per reconcile, and
// its own status write triggers one more reconcile.
type quietManager struct {
	ctrl.Manager
}

func (m quietManager) GetClient() client.Client {
	return quietClient{Client: m.Manager.GetClient()}
}

type quietClient struct {
	client.Client
}

// Update updates obj unless it is the object the cache holds.
func (c quietClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if len(opts) == 0 && cached(ctx, c.Client, obj) {
		return nil
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c quietClient) Status() client.SubResourceWriter {
	return quietStatus{SubResourceWriter: c.Client.Status(), reader: c.Client}
}

type quietStatus struct {
	client.SubResourceWriter
	reader client.Reader
}

// Update updates the status of obj unless the cache holds obj with it.
func (s quietStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if len(opts) == 0 && cached(ctx, s.reader, obj) {
		return nil
	}
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

// cached tells whether r holds obj as it is, at the same resource version:
// then writing it would change nothing.
func cached(ctx context.Context, r client.Reader, obj client.Object) bool {
	t := reflect.TypeOf(obj)
	if t.Kind() != reflect.Pointer {
		return false
	}
	have, ok := reflect.New(t.Elem()).Interface().(client.Object)
	if !ok || r.Get(ctx, client.ObjectKeyFromObject(obj), have) != nil {
		return false
	}
	return have.GetResourceVersion() == obj.GetResourceVersion() && equality.Semantic.DeepEqual(have, obj)
}
