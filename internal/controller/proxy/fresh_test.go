/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
)

func proxyAt(rv string) *v1alpha1.KubernetesProxy {
	return &v1alpha1.KubernetesProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p", ResourceVersion: rv}}
}

// lags records the cache lags observed.
type lags []float64

func (l *lags) Observe(v float64) { *l = append(*l, v) }

func TestLastWrites(t *testing.T) {
	const eventAfter = 2 * time.Second
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		reason string
		wrote  client.Object
		later  time.Duration
		cached string
		// behind is what behind says of the cache at cached; caughtUp what
		// CaughtUp says of an update to event after it.
		behind   bool
		event    string
		caughtUp bool
		// lags are the cache lags observed; the event comes eventAfter
		// the read.
		lags []float64
	}{
		"NoWrite": {
			reason: "A resource the provider did not write is never held back.",
			cached: "5", event: "6",
		},
		"CacheBehind": {
			reason: "A cache older than the last write holds the reconcile back, and the update that shows the write wakes it.",
			wrote:  proxyAt("7"), cached: "5", behind: true, event: "7", caughtUp: true, lags: []float64{eventAfter.Seconds()},
		},
		"CacheStillBehind": {
			reason: "An update older than the write does not wake the held back reconcile.",
			wrote:  proxyAt("7"), cached: "5", behind: true, event: "6",
		},
		"CacheAhead": {
			reason: "A cache that has seen a later version (another writer's) has seen the write.",
			wrote:  proxyAt("7"), cached: "9", event: "10",
		},
		"CacheSaw": {
			reason: "A cache that has seen the write lets the reconcile run, and the write is forgotten.",
			wrote:  proxyAt("7"), cached: "7", event: "8",
		},
		"WriteTooOld": {
			reason: "A cache that has not seen a write in maxCacheLag is believed: reconciles must not stop.",
			wrote:  proxyAt("7"), later: maxCacheLag + time.Second, cached: "5", event: "7",
		},
		"NotManaged": {
			reason: "Writes of anything but managed resources (connection Secrets) are not tracked.",
			wrote:  &corev1.Secret{ObjectMeta: metav1.ObjectMeta{UID: "uid-p", ResourceVersion: "7"}}, cached: "5", event: "7",
		},
		"NoVersionOrder": {
			reason: "Resource versions that are not integers count as caught up: the cache is believed.",
			wrote:  proxyAt("b"), cached: "a", event: "c",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			now := t0
			l := &lags{}
			w := newLastWrites(l)
			w.now = func() time.Time { return now }
			if tc.wrote != nil {
				w.wrote(tc.wrote)
			}
			now = now.Add(tc.later)
			if diff := cmp.Diff(tc.behind, w.behind(proxyAt(tc.cached))); diff != "" {
				t.Errorf("\n%s\nbehind(...): -want, +got:\n%s", tc.reason, diff)
			}
			now = now.Add(eventAfter)
			got := w.CaughtUp().Update(event.UpdateEvent{ObjectOld: proxyAt(tc.cached), ObjectNew: proxyAt(tc.event)})
			if diff := cmp.Diff(tc.caughtUp, got); diff != "" {
				t.Errorf("\n%s\nCaughtUp().Update(...): -want, +got:\n%s", tc.reason, diff)
			}
			// Once woken, or believed, the write is forgotten.
			if w.behind(proxyAt(tc.cached)) && !tc.behind {
				t.Errorf("\n%s\nbehind(...) after the update: want false", tc.reason)
			}
			if diff := cmp.Diff(tc.lags, []float64(*l), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\ncache lags observed: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCaughtUpOnlyWakesHeldBack(t *testing.T) {
	w := newLastWrites(&lags{})
	w.wrote(proxyAt("7"))
	p := w.CaughtUp()
	// No reconcile was held back: the update of the provider's own write
	// stays filtered, as without the gate.
	if p.Update(event.UpdateEvent{ObjectOld: proxyAt("5"), ObjectNew: proxyAt("7")}) {
		t.Error("CaughtUp().Update(...): want false when no reconcile waits")
	}
	o := proxyAt("7")
	if p.Create(event.CreateEvent{Object: o}) || p.Delete(event.DeleteEvent{Object: o}) || p.Generic(event.GenericEvent{Object: o}) {
		t.Error("CaughtUp() passes a create, delete or generic event: want only updates")
	}
}

// cacheOf is a cache that holds one resource, or none.
type cacheOf struct {
	client.Reader
	p *v1alpha1.KubernetesProxy
}

func (c cacheOf) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if c.p == nil || key != client.ObjectKeyFromObject(c.p) {
		return kerrors.NewNotFound(v1alpha1.SchemeGroupVersion.WithResource("kubernetesproxies").GroupResource(), key.Name)
	}
	c.p.DeepCopyInto(obj.(*v1alpha1.KubernetesProxy)) //nolint:forcetypeassert // The gate asks for what newObj makes.
	return nil
}

// writingClient answers every write with the resource version rv, and reads
// from its cache.
type writingClient struct {
	client.Client
	cache cacheOf
	rv    string
}

func (c writingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.cache.Get(ctx, key, obj, opts...)
}

func (c writingClient) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	obj.SetResourceVersion(c.rv)
	return nil
}

func (c writingClient) Status() client.SubResourceWriter { return writingStatus{c: c} }

type writingStatus struct {
	client.SubResourceWriter
	c writingClient
}

func (s writingStatus) Patch(_ context.Context, obj client.Object, _ client.Patch, _ ...client.SubResourcePatchOption) error {
	obj.SetResourceVersion(s.c.rv)
	return nil
}

func TestTrackingClient(t *testing.T) {
	cases := map[string]struct {
		reason string
		write  func(ctx context.Context, c client.Client, o client.Object) error
		cached string
		// behind is what behind says of the cache after the write.
		behind bool
		lags   []float64
	}{
		"EventFirst": {
			reason: "A write whose event the cache has before the response is observed at once, with no lag, and not waited for.",
			write:  func(ctx context.Context, c client.Client, o client.Object) error { return c.Update(ctx, o) },
			cached: "7", lags: []float64{0},
		},
		"StatusEventFirst": {
			reason: "A status write whose event came first is observed as well.",
			write: func(ctx context.Context, c client.Client, o client.Object) error {
				return c.Status().Patch(ctx, o, client.Merge)
			},
			cached: "7", lags: []float64{0},
		},
		"EventLater": {
			reason: "A write the cache has not seen yet is left for its event, and waited for.",
			write:  func(ctx context.Context, c client.Client, o client.Object) error { return c.Update(ctx, o) },
			cached: "5", behind: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := &lags{}
			w := newLastWrites(l)
			t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
			w.now = func() time.Time { return t0 }
			c := trackingClient{
				Client: writingClient{cache: cacheOf{p: proxyAt(tc.cached)}, rv: "7"},
				writes: w,
				newObj: func() client.Object { return &v1alpha1.KubernetesProxy{} },
			}
			if err := tc.write(t.Context(), c, proxyAt("5")); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.lags, []float64(*l), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\ncache lags observed: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.behind, w.behind(proxyAt(tc.cached))); diff != "" {
				t.Errorf("\n%s\nbehind(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestLagOfEachWrite shows that a write whose event came first leaves no
// record behind for the event of a later write to be measured against:
// the lag observed would be the time between the two writes.
func TestLagOfEachWrite(t *testing.T) {
	l := &lags{}
	w := newLastWrites(l)
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	w.now = func() time.Time { return now }
	cache := &cacheOf{}
	newObj := func() client.Object { return &v1alpha1.KubernetesProxy{} }
	write := func(rv string) {
		c := trackingClient{Client: writingClient{cache: *cache, rv: rv}, writes: w, newObj: newObj}
		if err := c.Update(t.Context(), proxyAt("5")); err != nil {
			t.Fatal(err)
		}
	}
	// The first write's event is in the cache before its response.
	cache.p = proxyAt("7")
	w.CaughtUp().Update(event.UpdateEvent{ObjectOld: proxyAt("5"), ObjectNew: proxyAt("7")})
	write("7")
	// Three seconds later, so is the second's.
	now = now.Add(3 * time.Second)
	cache.p = proxyAt("8")
	w.CaughtUp().Update(event.UpdateEvent{ObjectOld: proxyAt("7"), ObjectNew: proxyAt("8")})
	write("8")
	if diff := cmp.Diff([]float64{0, 0}, []float64(*l)); diff != "" {
		t.Errorf("cache lags observed: -want, +got:\n%s", diff)
	}
}

type countingReconciler int

func (c *countingReconciler) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	*c++
	return reconcile.Result{}, nil
}

func TestFreshGate(t *testing.T) {
	cases := map[string]struct {
		reason  string
		cached  *v1alpha1.KubernetesProxy
		wrote   string
		want    reconcile.Result
		reached int
	}{
		"Fresh": {
			reason: "A resource the cache has as the provider last wrote it is reconciled.",
			cached: proxyAt("7"), wrote: "7", reached: 1,
		},
		"Stale": {
			reason: "A resource the cache has older than the provider last wrote it waits, and is not reconciled.",
			cached: proxyAt("5"), wrote: "7", want: reconcile.Result{RequeueAfter: staleRetry},
		},
		"Gone": {
			reason: "A resource the cache does not have is the inner reconciler's to meet.",
			wrote:  "7", reached: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newLastWrites(&lags{})
			w.wrote(proxyAt(tc.wrote))
			var inner countingReconciler
			held := &heldBack{}
			g := freshGate{inner: &inner, kube: cacheOf{p: tc.cached}, newObj: func() client.Object { return &v1alpha1.KubernetesProxy{} }, writes: w, held: held}
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}}
			got, err := g.Reconcile(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nReconcile(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.reached, int(inner)); diff != "" {
				t.Errorf("\n%s\ninner reconciles: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.reached == 0, held.release(req)); diff != "" {
				t.Errorf("\n%s\nheld back: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestKeepBackoff(t *testing.T) {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}}
	held := &heldBack{}
	rl := keepBackoff{TypedRateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, time.Minute), held: held}
	// Two failed reconciles: the next retry waits 4 s.
	rl.When(req)
	rl.When(req)
	// A hold-back is forgotten as a success would be; the failures stay.
	held.hold(req)
	rl.Forget(req)
	if diff := cmp.Diff(4*time.Second, rl.When(req)); diff != "" {
		t.Errorf("When(...) after a hold-back: -want, +got:\n%s", diff)
	}
	// A success still forgets them.
	rl.Forget(req)
	if diff := cmp.Diff(time.Second, rl.When(req)); diff != "" {
		t.Errorf("When(...) after a success: -want, +got:\n%s", diff)
	}
}

func TestMakeRoom(t *testing.T) {
	full := func() map[types.UID]int {
		m := make(map[types.UID]int, maxWritten)
		for i := range maxWritten {
			m[types.UID(strconv.Itoa(i))] = i
		}
		return m
	}
	cases := map[string]struct {
		reason string
		m      map[types.UID]int
		uid    types.UID
		want   int
	}{
		"Room":  {reason: "A map below the bound keeps everything.", m: map[types.UID]int{"a": 1}, uid: "b", want: 1},
		"Known": {reason: "A full map keeps everything when the resource already has an entry.", m: full(), uid: "7", want: maxWritten},
		"Full":  {reason: "A full map drops one entry for a new resource.", m: full(), uid: "new", want: maxWritten - 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			makeRoom(tc.m, tc.uid)
			if diff := cmp.Diff(tc.want, len(tc.m)); diff != "" {
				t.Errorf("\n%s\nlen after makeRoom(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
