/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package phase starts the provider's periodic timers on shared boundaries
// of the wall clock, so that the Go runtime serves all of them in one
// wake-up instead of one wake-up each.
//
// An idle provider is woken mostly by timers it does not own: each
// controller's work queue refreshes two metrics every 500 ms
// (controller-runtime's priority queue, after client-go's workqueue). With
// eleven controllers started at scattered instants that is 22 wake-ups a
// second, and on a 2-core VM each costs ~150 µs of CPU (waking a thread,
// spinning for work, sleeping again). Started in phase, the same tickers
// fire together: the idle provider's CPU went from 3.4 to 2.6 ms a second
// (docs/bench.md at 22cd24f, "timers in phase").
package phase

import (
	"context"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// QueueTick is how often controller-runtime's priority queue updates its
// unfinished-work metrics. A ticker aligned by Wait to a multiple of it
// (the state recorders' 5 s) fires with the queues' too.
const QueueTick = 500 * time.Millisecond

// Until is how long from now until the next multiple of period on the wall
// clock; 0 when now is one, or period is not positive.
func Until(now time.Time, period time.Duration) time.Duration {
	if period <= 0 {
		return 0
	}
	last := now.Truncate(period)
	if last.Equal(now) {
		return 0
	}
	return last.Add(period).Sub(now)
}

// Wait blocks until the next multiple of period on the wall clock, or until
// ctx is done. A ticker of period (or of a multiple of it) made right after
// Wait returns ticks in phase with every other one made so.
func Wait(ctx context.Context, period time.Duration) {
	d := Until(time.Now(), period)
	if d == 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// NewQueue makes the work queue controller-runtime would (a priority queue
// with metrics named after the controller), but at the next multiple of
// QueueTick, so its metrics ticker ticks in phase with every other queue's,
// and whose delayed items become ready on those ticks too (aligned).
// It is a controller.Options NewQueue: controller-runtime calls it once, as
// the controller starts, which it delays by at most QueueTick.
func NewQueue(log logr.Logger) func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		Wait(context.Background(), QueueTick)
		return aligned[reconcile.Request]{
			PriorityQueue: priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) {
				o.Log = log.WithValues("controller", name)
				o.RateLimiter = rl
			}),
			now: time.Now,
		}
	}
}

// aligned is a priority queue whose delayed items become ready on a
// QueueTick of the wall clock, when the queues' metric tickers wake the
// process anyway. A steady provider requeues every resource once a poll,
// each at its own instant: at 1000 resources a minute that was ~17
// wake-ups a second, one thread woken and put back to sleep for each
// reconcile. Rounded up to the tick, the resources due in the same half
// second are reconciled in one wake-up. Only delays of at least a tick are
// rounded, so a poll or a backoff of minutes moves by at most half a
// second, and a short retry not at all; rate-limited adds (error backoff)
// are left to the queue.
type aligned[T comparable] struct {
	priorityqueue.PriorityQueue[T]
	now func() time.Time
}

func (q aligned[T]) AddWithOpts(o priorityqueue.AddOpts, items ...T) {
	if o.After >= QueueTick {
		o.After += Until(q.now().Add(o.After), QueueTick)
	}
	q.PriorityQueue.AddWithOpts(o, items...)
}

func (q aligned[T]) AddAfter(item T, after time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: after}, item)
}

// Options are o's controller-runtime options, with a work queue made by
// NewQueue.
func Options(o controller.Options, log logr.Logger) crcontroller.Options {
	co := o.ForControllerRuntime()
	co.NewQueue = NewQueue(log)
	return co
}
