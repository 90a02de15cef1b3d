/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
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
		"StaleUnchanged": {
			reason: "An object read at an older resource version with the status the cache holds is not written: it would only conflict.",
			change: func(p *corev1.Pod) { p.ResourceVersion = "1" },
			want:   0,
		},
		"StaleChanged": {
			reason: "An object read at an older resource version with another status is written, so the conflict is not hidden.",
			change: func(p *corev1.Pod) { p.ResourceVersion = "1"; p.Status.Message = "changed" },
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

func TestQuietStatusRemembersWrites(t *testing.T) {
	stored := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid"},
		Status:     corev1.PodStatus{Message: "A"},
	}
	cases := map[string]struct {
		reason string
		again  string
		want   int
	}{
		"SameAsWritten": {
			reason: "A reconcile that read the resource before the cache saw the last write, and computes that status again, writes nothing.",
			again:  "B",
			want:   1,
		},
		"SameAsCached": {
			reason: "A status equal to the cache's older one, but not to the last write, is written: the cache is behind.",
			again:  "A",
			want:   2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			updates := 0
			// The cache (the fake's store) never sees the writes.
			c := fake.NewClientBuilder().WithObjects(stored.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
				SubResourceUpdate: func(_ context.Context, _ client.Client, _ string, obj client.Object, _ ...client.SubResourceUpdateOption) error {
					updates++
					obj.SetResourceVersion("1000")
					return nil
				},
			}).Build()
			qc := quietClient{Client: c, written: newWrittenStatus()}
			read := func() *corev1.Pod {
				p := &corev1.Pod{}
				if err := c.Get(t.Context(), client.ObjectKeyFromObject(stored), p); err != nil {
					t.Fatal(err)
				}
				return p
			}
			p := read()
			p.Status.Message = "B"
			if err := qc.Status().Update(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			p = read()
			p.Status.Message = tc.again
			if err := qc.Status().Update(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, updates); diff != "" {
				t.Errorf("\n%s\nstatus updates: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestQuietClientCreate(t *testing.T) {
	conn := func(data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "conn"}, Type: resource.SecretTypeConnection, Data: data}
	}
	cases := map[string]struct {
		reason string
		obj    client.Object
		want   int
	}{
		"EmptyConnectionSecret": {
			reason: "A connection Secret with nothing in it is not created: the first details create it.",
			obj:    conn(nil),
			want:   0,
		},
		"ConnectionSecret": {
			reason: "A connection Secret with details is created.",
			obj:    conn(map[string][]byte{"endpoint": []byte("10.0.0.7:3128")}),
			want:   1,
		},
		"OtherSecret": {
			reason: "Any other empty Secret is created.",
			obj:    &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other"}},
			want:   1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			creates := 0
			c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				Create: func(_ context.Context, _ client.WithWatch, _ client.Object, _ ...client.CreateOption) error {
					creates++
					return nil
				},
			}).Build()
			if err := (quietClient{Client: c}).Create(t.Context(), tc.obj); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, creates); diff != "" {
				t.Errorf("\n%s\ncreates: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
