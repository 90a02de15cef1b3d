/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package config

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// usageSettle is how long a new, deleted or moved managed resource waits
// before its config is counted. Counted at once, 1000 new proxies were ~700
// status writes of one ClusterProviderConfig. Waiting folds the changes of
// a burst into one count every usageSettle; the count shows at most that
// much later. Deletion of the config itself is not delayed, and the
// reconcile that guards it counts the resources as they are.
const usageSettle = 2 * time.Second

// settled enqueues what handler h enqueues, after delay: a request already
// waiting keeps its time, so a burst of events is one reconcile.
type settled struct {
	h     handler.EventHandler
	delay time.Duration
}

func (s settled) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	s.h.Create(ctx, e, delayedQueue{q, s.delay})
}

func (s settled) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	s.h.Update(ctx, e, delayedQueue{q, s.delay})
}

func (s settled) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	s.h.Delete(ctx, e, delayedQueue{q, s.delay})
}

func (s settled) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	s.h.Generic(ctx, e, delayedQueue{q, s.delay})
}

var _ handler.TypedEventHandler[client.Object, reconcile.Request] = settled{}

// delayedQueue turns Add into AddAfter.
type delayedQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	delay time.Duration
}

func (q delayedQueue) Add(r reconcile.Request) { q.AddAfter(r, q.delay) }
