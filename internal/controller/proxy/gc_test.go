/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/egressproxy/provider-egressproxy/apis"
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

type (
	kparams = v1alpha1.KubernetesProxyParameters
	kobs    = v1alpha1.KubernetesProxyObservation
)

func TestCollect(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := runtime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&v1alpha1.KubernetesProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "alive", UID: "alive"}},
		&v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "pc"}},
		&v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "cpc"}},
	).Build()

	instance := func(uid string, age time.Duration, provider string) backend.Instance {
		return backend.Instance{
			ID: "memory://" + uid, Name: "egp-" + uid, CreatedAt: now.Add(-age),
			Ownership: backend.Ownership{Owner: backend.Owner{UID: "x"}, ProviderInstance: provider},
		}
	}
	withUID := func(in backend.Instance, uid string) backend.Instance {
		in.Ownership.Owner.UID = types.UID(uid)
		return in
	}
	listed := []backend.Instance{
		withUID(instance("alive", 2*time.Hour, "default"), "alive"),
		withUID(instance("orphan", 2*time.Hour, "default"), "orphan"),
		withUID(instance("young", time.Minute, "default"), "young"),
		withUID(instance("other", 2*time.Hour, "staging"), "other"),
	}
	var deleted []string
	b := backend.Fns[kparams, kobs]{
		// Both configs reach the same backend: the orphan must be deleted once.
		ListFn: func(context.Context) ([]backend.Instance, error) { return listed, nil },
		DeleteFn: func(_ context.Context, d backend.Desired[kparams]) error {
			deleted = append(deleted, d.Name)
			return nil
		},
	}
	configs := 0
	c := NewCollector(CollectorConfig[kparams, kobs]{
		Kube: kube,
		NewBackend: func(_ context.Context, _ client.Client, cfg Config) (backend.Backend[kparams, kobs], error) {
			configs++
			return b, nil
		},
		NewOwners: func() client.ObjectList { return &v1alpha1.KubernetesProxyList{} },
		NewConfigs: func() (client.ObjectList, client.ObjectList) {
			return &v1alpha1.ProviderConfigList{}, &v1alpha1.ClusterProviderConfigList{}
		},
	}, Options{ProviderInstance: "default", GCMinAge: time.Hour, GCInterval: time.Minute})
	c.now = func() time.Time { return now }
	c.log = logging.NewNopLogger()

	n, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"egp-orphan"}, deleted); diff != "" {
		t.Errorf("deleted: only the old orphan of this provider deployment, once: -want, +got:\n%s", diff)
	}
	if n != 1 || configs != 2 {
		t.Errorf("Collect: want 1 deletion over 2 configs, got %d over %d", n, configs)
	}

	// A backend that cannot list is skipped, never taken as empty.
	deleted = nil
	b.ListFn = func(context.Context) ([]backend.Instance, error) { return nil, errors.New("unreachable") }
	if _, err := c.Collect(context.Background()); err == nil || len(deleted) != 0 {
		t.Errorf("Collect with a failing List: want an error and no deletion, got %v and %v", err, deleted)
	}
}
