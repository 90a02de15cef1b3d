/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A reconcile that reads a resource older than the provider's own last write
// of it can only fail: its first write (the finalizer, the status) conflicts,
// and the managed reconciler requeues it, after having observed the instance
// for nothing. While 1000 new resources converge, the manager's cache runs
// seconds behind the API server, and the requeue after Create came back
// before the cache had seen Create's writes for 40–60% of them: at N=1000,
// 414 finalizer conflicts and ~175 status conflicts, each a whole extra
// reconcile with its backend calls (docs/bench.md at 22cd24f, "stale reads"). The
// fresh gate holds such a reconcile back until the cache has seen the write.

const (
	// staleRetry is when a held-back reconcile looks again if the watch
	// event that shows the cache caught up is not seen.
	staleRetry = 5 * time.Second
	// maxCacheLag is how long after a write the gate waits for the cache at
	// most: a cache that never catches up (a broken watch, until it lists
	// again) must not stop reconciles; past it they run, and at worst
	// conflict as they would without the gate.
	maxCacheLag = 30 * time.Second
)

// cacheLag is how long the manager's cache took to show the provider's own
// writes of managed resources: the time from a write's response to the
// watch event that carries it. A lag of seconds is an API server (or a
// provider) short of CPU; reconciles of those resources wait for it
// (freshGate) rather than conflict.
var cacheLag = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "egressproxy_cache_lag_seconds",
	Help:    "Time from the provider's write of a managed resource to the watch event that shows it in the provider's cache, by kind.",
	Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
}, []string{"kind"})

func init() {
	metrics.Registry.MustRegister(cacheLag)
}

// lastWrites remembers, per resource, the resource version of the
// provider's last write of it, until the cache has seen that version.
type lastWrites struct {
	mu   sync.Mutex
	last map[types.UID]lastWrite
	now  func() time.Time
	// lag observes how long the cache took to show a write.
	lag prometheus.Observer
}

type lastWrite struct {
	resourceVersion string
	at              time.Time
	// waiting: a reconcile was held back until the cache sees this write.
	waiting bool
}

func newLastWrites(lag prometheus.Observer) *lastWrites {
	return &lastWrites{last: map[types.UID]lastWrite{}, now: time.Now, lag: lag}
}

// wrote records a write of o, if o is a managed resource, and tells
// whether it did.
func (w *lastWrites) wrote(o client.Object) bool {
	if _, ok := o.(resource.Managed); !ok || o.GetUID() == "" {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// The write of a deleted resource is never seen. A dropped write costs
	// at most one reconcile of a stale copy.
	makeRoom(w.last, o.GetUID())
	w.last[o.GetUID()] = lastWrite{resourceVersion: o.GetResourceVersion(), at: w.now()}
	return true
}

// behind tells whether cached is older than the provider's last write of
// its resource, and that write is recent enough to wait for; it then
// remembers that a reconcile waits. A write the cache has seen, or one too
// old to wait for, is forgotten.
func (w *lastWrites) behind(cached client.Object) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, ok := w.last[cached.GetUID()]
	if !ok {
		return false
	}
	// A write the cache has seen, but that neither record's look nor
	// CaughtUp has matched yet (its event is on its way to the handlers),
	// is forgotten unobserved: its lag is not known.
	if atLeast(cached.GetResourceVersion(), l.resourceVersion) || w.now().Sub(l.at) > maxCacheLag {
		delete(w.last, cached.GetUID())
		return false
	}
	l.waiting = true
	w.last[cached.GetUID()] = l
	return true
}

// caughtUp tells whether o, as the cache now has it, is the version a held
// back reconcile waits for. A write the cache has seen is forgotten, and
// how long the cache took to see it observed.
func (w *lastWrites) caughtUp(o client.Object) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, ok := w.last[o.GetUID()]
	if !ok || !atLeast(o.GetResourceVersion(), l.resourceVersion) {
		return false
	}
	delete(w.last, o.GetUID())
	w.lag.Observe(w.now().Sub(l.at).Seconds())
	return l.waiting
}

// CaughtUp passes the update that shows the cache has seen a write a held
// back reconcile waits for, so that reconcile runs at once. Every other
// event is left to the controller's other predicates. It must come first
// among them (predicate.Or stops at the first that passes): it sees every
// update, so each write is forgotten, and its lag observed, as its event
// arrives.
func (w *lastWrites) CaughtUp() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectNew != nil && w.caughtUp(e.ObjectNew)
		},
	}
}

// freshGate holds back a reconcile of a resource the cache has an older
// version of than the provider last wrote, and lets every other one
// through to inner.
type freshGate struct {
	inner  reconcile.Reconciler
	kube   client.Reader
	newObj func() client.Object
	writes *lastWrites
	held   *heldBack
}

func (g freshGate) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	o := g.newObj()
	// Only read: the cache's own object needs no copy. Any error is the
	// inner reconciler's to meet.
	if err := g.kube.Get(ctx, req.NamespacedName, o, client.UnsafeDisableDeepCopy); err == nil && g.writes.behind(o) {
		g.held.hold(req)
		return reconcile.Result{RequeueAfter: staleRetry}, nil
	}
	return g.inner.Reconcile(ctx, req)
}

// heldBack are the requests the gate has just held back. controller-runtime
// forgets a request's failures when its reconcile asks to come back after a
// delay, as after a success; a hold-back is none: a failed reconcile that
// wrote its status (a new error message) is followed by a hold-back, and
// its error backoff must go on growing, or a backend that fails with a new
// message every time would be retried every second.
type heldBack struct {
	m sync.Map
}

func (h *heldBack) hold(r reconcile.Request) { h.m.Store(r, struct{}{}) }

// release tells whether r was held back, once.
func (h *heldBack) release(r reconcile.Request) bool {
	_, ok := h.m.LoadAndDelete(r)
	return ok
}

// keepBackoff is a controller's rate limiter that does not forget the
// failures of a request the gate held back.
type keepBackoff struct {
	workqueue.TypedRateLimiter[reconcile.Request]
	held *heldBack
}

func (k keepBackoff) Forget(r reconcile.Request) {
	if k.held.release(r) {
		return
	}
	k.TypedRateLimiter.Forget(r)
}

// trackingClient records the writes of managed resources it makes in
// writes. Client reads from the manager's cache.
type trackingClient struct {
	client.Client
	writes *lastWrites
	// newObj makes an empty object of the managed kind.
	newObj func() client.Object
}

// record records a write of o, then looks whether the cache already has it:
// the watch has a connection of its own, and the event of a write often
// arrives before the write's response. Such a write's lag is observed as
// the time from its record to the look (none, give or take). Left for
// CaughtUp, which saw its event before there was a record, it was never
// observed, and its record stayed until the early event of the resource's
// next write matched it: the lag observed was then the time between the
// two writes, seconds (docs/bench.md at 22cd24f, "every write's lag").
// Recording first leaves no gap: an event arriving between the record and
// the look is CaughtUp's, and the look then finds no record.
func (c trackingClient) record(ctx context.Context, o client.Object) {
	if !c.writes.wrote(o) {
		return
	}
	cached := c.newObj()
	// Only read: the cache's own object needs no copy.
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), cached, client.UnsafeDisableDeepCopy); err == nil {
		c.writes.caughtUp(cached)
	}
}

func (c trackingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := c.Client.Update(ctx, obj, opts...)
	if err == nil {
		c.record(ctx, obj)
	}
	return err
}

func (c trackingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := c.Client.Patch(ctx, obj, patch, opts...)
	if err == nil {
		c.record(ctx, obj)
	}
	return err
}

func (c trackingClient) Status() client.SubResourceWriter {
	return trackingStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type trackingStatus struct {
	client.SubResourceWriter
	c trackingClient
}

func (s trackingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	err := s.SubResourceWriter.Update(ctx, obj, opts...)
	if err == nil {
		s.c.record(ctx, obj)
	}
	return err
}

func (s trackingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	err := s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	if err == nil {
		s.c.record(ctx, obj)
	}
	return err
}
