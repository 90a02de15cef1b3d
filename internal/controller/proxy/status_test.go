/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestQuietStatusUpdate(t *testing.T) {
	stored := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Status:     corev1.PodStatus{Message: "as stored"},
	}
	cases := map[string]struct {
		reason string
		change func(p *corev1.Pod)
		want   int
	}{
		"Unchanged": {
			reason: "A status equal to the stored one at the same resource version is not written.",
			want:   0,
		},
		"StatusChanged": {
			reason: "A changed status is written.",
			change: func(p *corev1.Pod) { p.Status.Message = "changed" },
			want:   1,
		},
		"Stale": {
			reason: "An object read at another resource version is written, so a conflict is not hidden.",
			change: func(p *corev1.Pod) { p.ResourceVersion = "1" },
			want:   1,
		},
		"Gone": {
			reason: "An object the reader cannot find is written, and the API server answers.",
			change: func(p *corev1.Pod) { p.Name = "gone" },
			want:   1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			updates := 0
			c := fake.NewClientBuilder().WithObjects(stored.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
				SubResourceUpdate: func(_ context.Context, _ client.Client, _ string, _ client.Object, _ ...client.SubResourceUpdateOption) error {
					updates++
					return nil
				},
			}).Build()
			p := &corev1.Pod{}
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(stored), p); err != nil {
				t.Fatal(err)
			}
			if tc.change != nil {
				tc.change(p)
			}
			if err := (quietClient{Client: c}).Status().Update(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, updates); diff != "" {
				t.Errorf("\n%s\nstatus updates: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
