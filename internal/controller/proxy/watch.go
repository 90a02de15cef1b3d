/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// lookupTimeout bounds the cache reads that find the resource of a change.
const lookupTimeout = 5 * time.Second

// Changes turns the changes a backend.Watcher reports into reconcile
// requests of the managed resources that own the changed instances. The
// Connector hands it to every backend that watches; Setup makes it a source
// of the controller. Changes before the controller starts are dropped: the
// first reconcile of every resource sees them.
type Changes struct {
	providerInstance string
	watched          atomic.Bool

	mu         sync.Mutex
	queue      workqueue.TypedRateLimitingInterface[reconcile.Request]
	kube       client.Reader
	newManaged func() client.Object
	newList    func() client.ObjectList
}

// NewChanges returns the Changes of the provider deployment
// providerInstance; changes of other deployments' instances are ignored.
func NewChanges(providerInstance string) *Changes {
	return &Changes{providerInstance: providerInstance}
}

// resolveWith makes c find the owners of changes through kube, which holds
// resources made by newManaged and listed by newList.
func (c *Changes) resolveWith(kube client.Reader, newManaged func() client.Object, newList func() client.ObjectList) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kube, c.newManaged, c.newList = kube, newManaged, newList
}

// Watched tells whether a backend that watches has been connected, so the
// resources of this controller may be polled less often.
func (c *Changes) Watched() bool { return c.watched.Load() }

// Source is the controller source of the changes.
func (c *Changes) Source() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.queue = q
		return nil
	})
}

// Notify queues a reconcile of the resource that owns o. It never blocks on
// the controller.
func (c *Changes) Notify(o backend.Ownership) {
	if o.ProviderInstance != c.providerInstance {
		return
	}
	c.mu.Lock()
	q, kube, newManaged, newList := c.queue, c.kube, c.newManaged, c.newList
	c.mu.Unlock()
	if q == nil || kube == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	if key, ok := owner(ctx, kube, newManaged, newList, o.Owner); ok {
		q.Add(reconcile.Request{NamespacedName: key})
	}
}

// owner finds the resource of o by its UID. The name label is usually its
// name, but label values are shortened and have no dots, so the resources
// of the namespace are searched when it is not.
func owner(ctx context.Context, kube client.Reader, newManaged func() client.Object, newList func() client.ObjectList, o backend.Owner) (types.NamespacedName, bool) {
	key := types.NamespacedName{Namespace: o.Namespace, Name: o.Name}
	mg := newManaged()
	if err := kube.Get(ctx, key, mg); err == nil && mg.GetUID() == o.UID {
		return key, true
	}
	l := newList()
	if err := kube.List(ctx, l, client.InNamespace(o.Namespace)); err != nil {
		return types.NamespacedName{}, false
	}
	found := false
	_ = meta.EachListItem(l, func(obj runtime.Object) error {
		if m, err := meta.Accessor(obj); err == nil && m.GetUID() == o.UID {
			key, found = types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}, true
		}
		return nil
	})
	return key, found
}
