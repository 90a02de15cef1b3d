/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
)

func TestCreateResult(t *testing.T) {
	mr := func(a map[string]string) *v1alpha1.KubernetesProxy {
		return &v1alpha1.KubernetesProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: extUID, Annotations: a}}
	}
	pending := map[string]string{meta.AnnotationKeyExternalName: "egp-web", meta.AnnotationKeyExternalCreatePending: "2026-12-02T04:00:00Z"}
	with := func(kv ...string) map[string]string {
		a := map[string]string{}
		for k, v := range pending {
			a[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			a[kv[i]] = kv[i+1]
		}
		return a
	}
	succeeded := meta.AnnotationKeyExternalCreateSucceeded
	cases := map[string]struct {
		reason string
		wrote  map[string]string // the create-pending write, if any
		calls  []map[string]string
		want   int // writes of the wrapped updater
	}{
		"OnlySucceeded": {
			reason: "The create-succeeded annotation alone is not written: the create-pending write saved everything else.",
			wrote:  pending,
			calls:  []map[string]string{with(succeeded, "2026-12-02T04:00:01Z")},
			want:   0,
		},
		"ExternalNameChanged": {
			reason: "An external name Create changed is saved.",
			wrote:  pending,
			calls:  []map[string]string{with(succeeded, "2026-12-02T04:00:01Z", meta.AnnotationKeyExternalName, "other")},
			want:   1,
		},
		"Failed": {
			reason: "create-failed is saved: the reconciler retries Create after it.",
			wrote:  pending,
			calls:  []map[string]string{with(meta.AnnotationKeyExternalCreateFailed, "2026-12-02T04:00:01Z")},
			want:   1,
		},
		"NoPendingWrite": {
			reason: "Without a create-pending write seen by this process, the annotations are saved as crossplane-runtime does.",
			calls:  []map[string]string{with(succeeded, "2026-12-02T04:00:01Z")},
			want:   1,
		},
		"OnceOnly": {
			reason: "A create-pending write excuses one create result only.",
			wrote:  pending,
			calls:  []map[string]string{with(succeeded, "2026-12-02T04:00:01Z"), with(succeeded, "2026-12-02T04:00:02Z")},
			want:   1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := newPendingCreates()
			if tc.wrote != nil {
				p.wrote(mr(tc.wrote))
			}
			writes := 0
			u := createResult{
				CriticalAnnotationUpdater: managed.CriticalAnnotationUpdateFn(func(context.Context, client.Object) error {
					writes++
					return nil
				}),
				pending: p,
			}
			for _, a := range tc.calls {
				if err := u.UpdateCriticalAnnotations(t.Context(), mr(a)); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want, writes); diff != "" {
				t.Errorf("\n%s\nwrites: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
