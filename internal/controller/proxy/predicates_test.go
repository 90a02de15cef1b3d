/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestDesiredStateChanged(t *testing.T) {
	obj := func(gen int64, labels, annotations map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Generation: gen, Labels: labels, Annotations: annotations}}
	}
	const name = meta.AnnotationKeyExternalName
	cases := map[string]struct {
		reason   string
		old, cur *metav1.PartialObjectMetadata
		want     bool
	}{
		"CreatePendingWithFirstExternalName": {
			reason: "The reconciler's write before Create carries the initializer's name; it requeues by itself.",
			old:    obj(1, nil, nil),
			cur:    obj(1, nil, map[string]string{name: "p", meta.AnnotationKeyExternalCreatePending: "t"}),
		},
		"CreateSucceeded": {
			reason: "The reconciler requeues after a successful Create; the write's event would reconcile twice.",
			old:    obj(1, nil, map[string]string{name: "p", meta.AnnotationKeyExternalCreatePending: "t"}),
			cur:    obj(1, nil, map[string]string{name: "p", meta.AnnotationKeyExternalCreatePending: "t", meta.AnnotationKeyExternalCreateSucceeded: "t"}),
		},
		"CreateFailedRemoved": {
			reason: "Every reconciler annotation is its own bookkeeping, also when it goes away.",
			old:    obj(1, nil, map[string]string{meta.AnnotationKeyExternalCreateFailed: "t"}),
			cur:    obj(1, nil, nil),
		},
		"ExternalNameChanged": {
			reason: "A user who changes the external name wants it acted on.",
			old:    obj(1, nil, map[string]string{name: "p"}),
			cur:    obj(1, nil, map[string]string{name: "q"}),
			want:   true,
		},
		"ExternalNameRemoved": {
			reason: "Removing the external name is a user's change.",
			old:    obj(1, nil, map[string]string{name: "p"}),
			cur:    obj(1, nil, nil),
			want:   true,
		},
		"Paused": {
			reason: "crossplane.io/paused is a user's annotation.",
			old:    obj(1, nil, map[string]string{name: "p"}),
			cur:    obj(1, nil, map[string]string{name: "p", meta.AnnotationKeyReconciliationPaused: "true"}),
			want:   true,
		},
		"UserAnnotationRemoved": {
			reason: "Removing an annotation such as paused resumes at once.",
			old:    obj(1, nil, map[string]string{meta.AnnotationKeyReconciliationPaused: "true"}),
			cur:    obj(1, nil, nil),
			want:   true,
		},
		"UserAnnotationWithCreateSucceeded": {
			reason: "A user's change in the same update as the reconciler's still passes.",
			old:    obj(1, nil, nil),
			cur:    obj(1, nil, map[string]string{"team": "a", meta.AnnotationKeyExternalCreateSucceeded: "t"}),
			want:   true,
		},
		"Spec": {
			reason: "A spec change bumps the generation.",
			old:    obj(1, nil, nil),
			cur:    obj(2, nil, nil),
			want:   true,
		},
		"Labels": {
			reason: "Labels are the user's.",
			old:    obj(1, nil, nil),
			cur:    obj(1, map[string]string{"a": "b"}, nil),
			want:   true,
		},
		"StatusOnly": {
			reason: "A status write changes neither generation, labels nor annotations.",
			old:    obj(1, nil, map[string]string{name: "p"}),
			cur:    obj(1, nil, map[string]string{name: "p"}),
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			got := desiredStateChanged().Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.cur})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ndesiredStateChanged().Update(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
