/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

func TestRecorder(t *testing.T) {
	cases := map[string]struct {
		reason string
		normal bool
		want   []string
	}{
		"WarningsOnly": {
			reason: "By default only warnings are recorded, also through an annotated recorder.",
			want:   []string{"Warning CannotCreateExternalResource boom map[external-name:x]"},
		},
		"All": {
			reason: "With normal events on, both are recorded.",
			normal: true,
			want:   []string{"Normal CreatedExternalResource created map[external-name:x]", "Warning CannotCreateExternalResource boom map[external-name:x]"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fr := record.NewFakeRecorder(10)
			r := recorder(event.NewAPIRecorder(fr), tc.normal).WithAnnotations("external-name", "x")
			r.Event(&corev1.Pod{}, event.Normal("CreatedExternalResource", "created"))
			r.Event(&corev1.Pod{}, event.Warning("CannotCreateExternalResource", errors.New("boom")))
			close(fr.Events)
			var got []string
			for e := range fr.Events {
				got = append(got, e)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nevents: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
