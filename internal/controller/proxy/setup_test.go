/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
)

func TestPollHook(t *testing.T) {
	type want struct{ Min, Max time.Duration }
	cases := map[string]struct {
		reason     string
		o          Options
		watched    bool
		annotation string
		want       want
	}{
		"NotWatched": {
			reason: "A backend that does not watch keeps the poll.",
			o:      Options{WatchedPollInterval: 10 * time.Minute},
			want:   want{Min: time.Minute, Max: time.Minute},
		},
		"Watched": {
			reason:  "A watching backend gets the watched poll.",
			o:       Options{WatchedPollInterval: 10 * time.Minute},
			watched: true,
			want:    want{Min: 10 * time.Minute, Max: 10 * time.Minute},
		},
		"WatchedWithTraffic": {
			reason:  "A watching backend is polled at least every TrafficInterval, so its traffic counts stay fresh.",
			o:       Options{WatchedPollInterval: 10 * time.Minute, TrafficInterval: 2 * time.Minute},
			watched: true,
			want:    want{Min: 2 * time.Minute, Max: 2 * time.Minute},
		},
		"OwnAnnotation": {
			reason:     "A resource's own poll interval wins over the watched poll.",
			o:          Options{WatchedPollInterval: 10 * time.Minute},
			watched:    true,
			annotation: "30s",
			want:       want{Min: time.Minute, Max: time.Minute},
		},
		"Jitter": {
			reason:  "Jitter moves the poll either way by at most itself.",
			o:       Options{WatchedPollInterval: 10 * time.Minute, PollJitter: 30 * time.Second},
			watched: true,
			want:    want{Min: 10*time.Minute - 30*time.Second, Max: 10*time.Minute + 30*time.Second},
		},
		"JitterCapped": {
			reason: "Jitter is at most a tenth of the poll.",
			o:      Options{PollJitter: time.Minute},
			want:   want{Min: 54 * time.Second, Max: 66 * time.Second},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mg := &v1alpha1.KubernetesProxy{}
			if tc.annotation != "" {
				meta.AddAnnotations(mg, map[string]string{meta.AnnotationKeyPollInterval: tc.annotation})
			}
			hook := pollHook(tc.o, func() bool { return tc.watched })
			got := want{Min: time.Duration(1 << 62), Max: 0}
			for range 200 {
				// The reconciler passes the annotation's interval, or --poll.
				d := hook(mg, time.Minute)
				got.Min, got.Max = min(got.Min, d), max(got.Max, d)
			}
			if got.Min < tc.want.Min || got.Max > tc.want.Max {
				t.Errorf("\n%s\npoll outside [%s, %s]: %s", tc.reason, tc.want.Min, tc.want.Max, cmp.Diff(tc.want, got))
			}
		})
	}
}

func TestUsersOf(t *testing.T) {
	proxy := func(ns, name, secret string) *v1alpha1.KubernetesProxy {
		p := &v1alpha1.KubernetesProxy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if secret != "" {
			p.Spec.ForProvider.CredentialsSecretRef = &commonv1alpha1.LocalSecretReference{Name: secret}
		}
		return p
	}
	ref := func(p *v1alpha1.KubernetesProxy) string {
		if r := p.Spec.ForProvider.CredentialsSecretRef; r != nil {
			return r.Name
		}
		return ""
	}
	s := extScheme(t)
	// The fake client refuses MatchingFields on a field it has no index of.
	c := fake.NewClientBuilder().WithScheme(s).WithIndex(&v1alpha1.KubernetesProxy{}, indexCredentialsRef, credentialsIndex(ref)).WithObjects(
		proxy("team", "a", "creds"), proxy("team", "b", "other"), proxy("team", "c", ""), proxy("elsewhere", "d", "creds"),
	).Build()
	fn := usersOf(c, s, v1alpha1.KubernetesProxyGroupVersionKind.GroupVersion().WithKind(v1alpha1.KubernetesProxyKind+"List"))
	got := fn(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "creds"}})
	want := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "team", Name: "a"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("usersOf(...): a changed Secret reconciles the resources of its namespace that use it, and only those: -want, +got:\n%s", diff)
	}
}
