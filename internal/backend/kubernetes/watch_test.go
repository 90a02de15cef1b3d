/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// TestWatchCachePending shows read-your-writes: an object this backend
// wrote is read from the API server until the watch delivers that write.
func TestWatchCachePending(t *testing.T) {
	cm := func(rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testName, ResourceVersion: rv,
			Labels: testOwnership().Labels(backend.KubernetesLabelKeys)}}
	}
	type want struct {
		Pending  bool
		Reported int
	}
	cases := map[string]struct {
		reason  string
		deleted bool
		event   func(h toolscache.ResourceEventHandler)
		want    want
	}{
		"NotDelivered": {
			reason: "Until the watch delivers the write, the object is read from the API server.",
			want:   want{Pending: true},
		},
		"OlderVersion": {
			reason: "An event of the version before the write leaves it pending.",
			event:  func(h toolscache.ResourceEventHandler) { h.OnUpdate(cm("1"), cm("1")) },
			want:   want{Pending: true},
		},
		"Delivered": {
			reason: "The event of the written version ends it, and reports the owner.",
			event:  func(h toolscache.ResourceEventHandler) { h.OnUpdate(cm("1"), cm("2")) },
			want:   want{Pending: false, Reported: 1},
		},
		"NewerDelivered": {
			reason: "An event of a newer version (the write and a status update after it) ends it too.",
			event:  func(h toolscache.ResourceEventHandler) { h.OnUpdate(cm("1"), cm("3")) },
			want:   want{Pending: false, Reported: 1},
		},
		"DeleteDelivered": {
			reason:  "The delete event of a deleted object ends it, and reports the owner.",
			deleted: true,
			event:   func(h toolscache.ResourceEventHandler) { h.OnDelete(toolscache.DeletedFinalStateUnknown{Obj: cm("2")}) },
			want:    want{Pending: false, Reported: 1},
		},
		"InitialList": {
			reason: "The initial list is not a change.",
			event:  func(h toolscache.ResourceEventHandler) { h.OnAdd(cm("2"), true) },
			want:   want{Pending: false, Reported: 0},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWatchCache(&rest.Config{}, nil, nil)
			// A started cache (any will do): wrote records only while one
			// runs.
			w.started, w.cache = true, &informertest.FakeInformers{}
			var got want
			w.setNotify(func(o backend.Ownership) {
				if o == testOwnership() {
					got.Reported++
				}
			})
			w.wrote(cm("2"), tc.deleted)
			if tc.event != nil {
				tc.event(w.handler(reflect.TypeOf(&corev1.ConfigMap{}), true))
			}
			_, got.Pending = w.pending[objectKey{kind: reflect.TypeOf(&corev1.ConfigMap{}), namespace: testNS, name: testName}]
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
