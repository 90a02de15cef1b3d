/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package config

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	kubernetesv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
)

// TestConflictRequeues shows that a write of the config controllers that
// meets a newer object is requeued, not reported: the health check patches
// the status of the same configs, and a provider that starts with a new
// config met it at every start, logged as an error with a stack trace.
func TestConflictRequeues(t *testing.T) {
	s := testScheme(t)
	g := kubernetesGroup(t, s)
	conflict := kerrors.NewConflict(schema.GroupResource{Group: "kubernetes.m.egressproxy.io", Resource: "providerconfigs"}, "default", nil)
	boom := kerrors.NewServiceUnavailable("etcd is gone")
	// A new config with a user: the first count adds the finalizer, then
	// writes the count.
	newConfig := func() []client.Object {
		return []client.Object{
			&kubernetesv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "default"}},
			proxyUsing("team", "web", "ProviderConfig", "default"),
		}
	}
	// A Secret of a namespaced config, which InUse holds with a patch.
	configWithSecret := func() []client.Object {
		pc := &kubernetesv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "default"}}
		pc.Spec.Credentials.Source = kubernetesv1alpha1.CredentialsSourceSecret
		pc.Spec.Credentials.SecretRef = &commonv1alpha1.SecretKeySelector{SecretReference: commonv1alpha1.SecretReference{Name: "kubeconfig"}, Key: "kubeconfig"}
		return []client.Object{pc, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "kubeconfig"}}}
	}
	type want struct {
		result reconcile.Result
		err    bool
	}
	cases := map[string]struct {
		reason string
		objs   []client.Object
		funcs  interceptor.Funcs
		users  bool
		want   want
	}{
		"UsersStatusConflict": {
			reason: "The count's status write meeting the health check's patch is requeued without an error.",
			objs:   newConfig(),
			funcs: interceptor.Funcs{SubResourceUpdate: func(context.Context, client.Client, string, client.Object, ...client.SubResourceUpdateOption) error {
				return conflict
			}},
			users: true,
			want:  want{result: reconcile.Result{Requeue: true}},
		},
		"UsersFinalizerConflict": {
			reason: "Holding the config with its finalizer, when the config just changed, is requeued without an error.",
			objs:   newConfig(),
			funcs: interceptor.Funcs{Update: func(context.Context, client.WithWatch, client.Object, ...client.UpdateOption) error {
				return conflict
			}},
			users: true,
			want:  want{result: reconcile.Result{Requeue: true}},
		},
		"UsersOtherError": {
			reason: "Any other error is still an error, retried with backoff and logged.",
			objs:   newConfig(),
			funcs: interceptor.Funcs{SubResourceUpdate: func(context.Context, client.Client, string, client.Object, ...client.SubResourceUpdateOption) error {
				return boom
			}},
			users: true,
			want:  want{err: true},
		},
		"InUseConflict": {
			reason: "Holding a config's Secret, when the Secret just changed, is requeued without an error.",
			objs:   configWithSecret(),
			funcs: interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
				return conflict
			}},
			want: want{result: reconcile.Result{Requeue: true}},
		},
		"InUseOtherError": {
			reason: "Any other error of InUse is still an error.",
			objs:   configWithSecret(),
			funcs: interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
				return boom
			}},
			want: want{err: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := fakeKube(t, s, tc.funcs, tc.objs...)
			var r reconcile.Reconciler
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: "default"}}
			if tc.users {
				r = NewUsers(kube, g, g.ProviderConfig(), event.NewAPIRecorder(record.NewFakeRecorder(10)))
			} else {
				r = &InUse{client: kube, groups: []group{g}}
				req = reconcile.Request{NamespacedName: types.NamespacedName{Name: "team"}}
			}
			result, err := r.Reconcile(t.Context(), req)
			got := want{result: result, err: err != nil}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nReconcile(): -want, +got:\n%s\nerror: %v", tc.reason, diff, err)
			}
		})
	}
}
