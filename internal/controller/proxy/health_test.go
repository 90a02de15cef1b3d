/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
)

// checkedBackend is a backend with a health check.
type checkedBackend struct {
	backend.Fns[kparams, kobs]
	err error
}

func (b checkedBackend) CheckHealth(context.Context) error { return b.err }

func TestHealthReporter(t *testing.T) {
	s := runtime.NewScheme()
	if err := registry.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	good := &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "good"}}
	bad := &v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "bad"}}
	unchecked := &v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "unchecked"}}
	kube := fake.NewClientBuilder().WithScheme(s).WithObjects(good, bad, unchecked).
		WithStatusSubresource(good, bad, unchecked).Build()

	h := NewHealthReporter(CollectorConfig[kparams, kobs]{
		Kube: kube,
		NewBackend: func(_ context.Context, _ client.Client, cfg Config) (backend.Backend[kparams, kobs], error) {
			switch cfg.Object.GetName() {
			case "bad":
				return checkedBackend{err: backend.Permanent(errors.New("credentials rejected: invalid_grant"))}, nil
			case "unchecked":
				return backend.Fns[kparams, kobs]{}, nil
			}
			return checkedBackend{}, nil
		},
		NewConfigs: func() (client.ObjectList, client.ObjectList) {
			return &v1alpha1.ProviderConfigList{}, &v1alpha1.ClusterProviderConfigList{}
		},
	}, "kubernetes", Options{HealthInterval: 1})
	h.log = logging.NewNopLogger()
	h.CheckAll(context.Background())

	type want struct {
		status corev1.ConditionStatus
		reason xpv2.ConditionReason
		msg    string
	}
	cases := map[string]struct {
		reason string
		obj    interface {
			client.Object
			GetCondition(xpv2.ConditionType) xpv2.Condition
		}
		want want
	}{
		"Healthy":       {reason: "A backend whose check passes makes the config Healthy.", obj: &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "good"}}, want: want{status: corev1.ConditionTrue, reason: "Available"}},
		"NoHealthCheck": {reason: "A backend without a health check checked nothing, so the config is Healthy=Unknown, not Healthy.", obj: &v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "unchecked"}}, want: want{status: corev1.ConditionUnknown, reason: ReasonHealthCheckUnsupported, msg: "the kubernetes backend has no health check; the config's credentials are only tried when a proxy is reconciled"}},
		"Unhealthy":     {reason: "A failed check shows its class and message on the config.", obj: &v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "bad"}}, want: want{status: corev1.ConditionFalse, reason: "PermanentError", msg: "credentials rejected: invalid_grant"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := kube.Get(context.Background(), types.NamespacedName{Namespace: tc.obj.GetNamespace(), Name: tc.obj.GetName()}, tc.obj); err != nil {
				t.Fatal(err)
			}
			c := tc.obj.GetCondition(TypeHealthy)
			if diff := cmp.Diff(tc.want, want{status: c.Status, reason: c.Reason, msg: c.Message}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nHealthy condition: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
