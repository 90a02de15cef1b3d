/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package phase

import (
	"context"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestUntil(t *testing.T) {
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	cases := map[string]struct {
		reason string
		now    time.Time
		period time.Duration
		want   time.Duration
	}{
		"OnBoundary": {
			reason: "A boundary is not waited for again.",
			now:    at("2026-12-02T10:00:01.5Z"),
			period: 500 * time.Millisecond,
		},
		"JustAfterBoundary": {
			reason: "Just after a boundary the next one is a whole period less the excess away.",
			now:    at("2026-12-02T10:00:01.000001Z"),
			period: 500 * time.Millisecond,
			want:   499999 * time.Microsecond,
		},
		"Between": {
			reason: "Boundaries are multiples of the period on the wall clock, not from some start.",
			now:    at("2026-12-02T10:00:03.2Z"),
			period: 5 * time.Second,
			want:   1800 * time.Millisecond,
		},
		"NoPeriod": {
			reason: "Without a period there is nothing to wait for.",
			now:    at("2026-12-02T10:00:03.2Z"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Until(tc.now, tc.period)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nUntil(%s, %s): -want, +got:\n%s", tc.reason, tc.now, tc.period, diff)
			}
		})
	}
}

func TestWaitHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	Wait(ctx, time.Hour)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Wait(cancelled, 1h) returned after %s: a cancelled context must end the wait", d)
	}
}

// A queue from NewQueue is the one controller-runtime would make, made on a
// boundary.
func TestNewQueue(t *testing.T) {
	const name = "phase-test"
	before := time.Now()
	q := NewQueue(logr.Discard())(name, workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	after := time.Now()
	defer q.ShutDown()

	if !before.Truncate(QueueTick).Before(after.Truncate(QueueTick)) {
		t.Errorf("NewQueue(...) made its queue between %s and %s: want it made after the next multiple of %s", before.Format(time.StampMicro), after.Format(time.StampMicro), QueueTick)
	}
	// The controller keeps its priorities only with a PriorityQueue.
	if _, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); !ok {
		t.Errorf("NewQueue(...): got a %T, want a priorityqueue.PriorityQueue", q)
	}

	// Its metrics are the controller's, as without NewQueue.
	q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "mr"}})
	item, _ := q.Get()
	q.Done(item)
	if got := adds(t, name); got != 1 {
		t.Errorf("workqueue_adds_total{name=%q}: got %v, want 1", name, got)
	}
}

// recording is a priority queue that records what is added to it.
type recording struct {
	priorityqueue.PriorityQueue[string]
	added []priorityqueue.AddOpts
}

func (r *recording) AddWithOpts(o priorityqueue.AddOpts, _ ...string) {
	r.added = append(r.added, o)
}

func TestAligned(t *testing.T) {
	now, err := time.Parse(time.RFC3339Nano, "2026-12-02T10:00:00.2Z")
	if err != nil {
		t.Fatal(err)
	}
	prio := 1
	cases := map[string]struct {
		reason string
		add    func(q aligned[string])
		want   priorityqueue.AddOpts
	}{
		"Poll": {
			reason: "A poll's delay is rounded up so the item is ready on the next tick after it.",
			add: func(q aligned[string]) {
				q.AddWithOpts(priorityqueue.AddOpts{After: time.Minute, Priority: &prio}, "mr")
			},
			want: priorityqueue.AddOpts{After: time.Minute + 300*time.Millisecond, Priority: &prio},
		},
		"AddAfter": {
			reason: "AddAfter is rounded like AddWithOpts.",
			add:    func(q aligned[string]) { q.AddAfter("mr", 2*time.Second) },
			want:   priorityqueue.AddOpts{After: 2*time.Second + 300*time.Millisecond},
		},
		"OnTick": {
			reason: "A delay that ends on a tick is kept.",
			add:    func(q aligned[string]) { q.AddAfter("mr", 1300*time.Millisecond) },
			want:   priorityqueue.AddOpts{After: 1300 * time.Millisecond},
		},
		"ShortRetry": {
			reason: "A delay shorter than a tick is a quick retry, not delayed further.",
			add:    func(q aligned[string]) { q.AddAfter("mr", 100*time.Millisecond) },
			want:   priorityqueue.AddOpts{After: 100 * time.Millisecond},
		},
		"RateLimited": {
			reason: "Error backoff is the queue's rate limiter's to decide.",
			add: func(q aligned[string]) {
				q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, "mr")
			},
			want: priorityqueue.AddOpts{RateLimited: true},
		},
		"Now": {
			reason: "An item added without a delay is ready at once.",
			add:    func(q aligned[string]) { q.AddWithOpts(priorityqueue.AddOpts{}, "mr") },
			want:   priorityqueue.AddOpts{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &recording{}
			tc.add(aligned[string]{PriorityQueue: r, now: func() time.Time { return now }})
			if diff := cmp.Diff([]priorityqueue.AddOpts{tc.want}, r.added); diff != "" {
				t.Errorf("%s\nadded at %s: -want, +got:\n%s", tc.reason, now.Format(time.StampMilli), diff)
			}
		})
	}
}

func TestOptions(t *testing.T) {
	co := Options(controller.Options{MaxConcurrentReconciles: 7}, logr.Discard())
	if co.NewQueue == nil {
		t.Error("Options(...).NewQueue: got nil, want the queue made in phase")
	}
	if co.MaxConcurrentReconciles != 7 || co.RateLimiter == nil || co.RecoverPanic == nil {
		t.Errorf("Options(...): got %+v, want crossplane-runtime's ForControllerRuntime options kept", co)
	}
}

// adds is workqueue_adds_total of the named queue, from controller-runtime's
// registry.
func adds(t *testing.T, name string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "workqueue_adds_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == name {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
