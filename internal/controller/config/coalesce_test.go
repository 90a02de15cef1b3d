/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package config

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubernetesv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
)

// queued records what a handler enqueues, and how.
type queued struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	now   []reconcile.Request
	after map[reconcile.Request]time.Duration
}

func (q *queued) Add(r reconcile.Request) { q.now = append(q.now, r) }
func (q *queued) AddAfter(r reconcile.Request, d time.Duration) {
	if q.after == nil {
		q.after = map[reconcile.Request]time.Duration{}
	}
	q.after[r] = d
}

func TestSettledUserEvents(t *testing.T) {
	usage := func(ns, kind, name string) *kubernetesv1alpha1.KubernetesProxy {
		return proxyUsing(ns, "web", kind, name)
	}
	req := func(ns, name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
	}
	cases := map[string]struct {
		reason string
		kind   string
		fire   func(h settled, q *queued)
		want   map[reconcile.Request]time.Duration
	}{
		"BurstOfCreates": {
			reason: "A burst of new proxies: the config is counted once, after the settle time, not once per proxy.",
			kind:   "ClusterProviderConfig",
			fire: func(h settled, q *queued) {
				for range 3 {
					h.Create(context.Background(), event.CreateEvent{Object: usage("team-a", "ClusterProviderConfig", "default")}, q)
				}
			},
			want: map[reconcile.Request]time.Duration{req("", "default"): usageSettle},
		},
		"NamespacedConfigDelete": {
			reason: "A deleted user of a namespaced config counts that namespace's config, later.",
			kind:   "ProviderConfig",
			fire: func(h settled, q *queued) {
				h.Delete(context.Background(), event.DeleteEvent{Object: usage("team-a", "ProviderConfig", "mine")}, q)
			},
			want: map[reconcile.Request]time.Duration{req("team-a", "mine"): usageSettle},
		},
		"OtherKind": {
			reason: "The handler picks the configs of its own kind only.",
			kind:   "ProviderConfig",
			fire: func(h settled, q *queued) {
				h.Update(context.Background(), event.UpdateEvent{ObjectOld: usage("team-a", "ClusterProviderConfig", "default"), ObjectNew: usage("team-a", "ClusterProviderConfig", "default")}, q)
			},
		},
		"ChangedReference": {
			reason: "A proxy moved to another config is counted on both.",
			kind:   "ProviderConfig",
			fire: func(h settled, q *queued) {
				h.Update(context.Background(), event.UpdateEvent{ObjectOld: usage("team-a", "ProviderConfig", "old"), ObjectNew: usage("team-a", "ProviderConfig", "new")}, q)
			},
			want: map[reconcile.Request]time.Duration{req("team-a", "old"): usageSettle, req("team-a", "new"): usageSettle},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q := &queued{}
			tc.fire(settled{h: toConfig(schema.GroupVersionKind{Kind: tc.kind}), delay: usageSettle}, q)
			if len(q.now) != 0 {
				t.Errorf("%s\nenqueued at once: %v", tc.reason, q.now)
			}
			if diff := cmp.Diff(tc.want, q.after); diff != "" {
				t.Errorf("%s\nenqueued after a delay: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
