/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"
	"reflect"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/egressproxy/provider-egressproxy/apis"
	kubernetesv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
)

func TestStateMetricsKinds(t *testing.T) {
	kinds, err := managedKinds(apis.AddToScheme)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range kinds {
		if name := reflect.TypeOf(k.obj).Elem().Name(); name != k.gvk.Kind {
			t.Errorf("managedKinds(apis.AddToScheme): kind %s holds a %s", k.gvk.Kind, name)
		}
		got = append(got, k.gvk.Kind)
	}
	sort.Strings(got)
	// Every managed resource kind of the provider, and nothing else (no
	// provider configs, no lists).
	want := []string{"GCPProxy", "KVMProxy", "KubernetesProxy"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("managedKinds(apis.AddToScheme): -want, +got:\n%s", diff)
	}
}

// runnables is a manager that only collects what is added to it.
type runnables struct {
	manager.Manager
	added []manager.Runnable
}

func (m *runnables) Add(r manager.Runnable) error {
	m.added = append(m.added, r)
	return nil
}

// storeInformer is an informer whose store holds what a test puts there.
type storeInformer struct {
	cache.Informer
	store  toolscache.Store
	synced bool
	gets   atomic.Int32
}

func (i *storeInformer) GetStore() toolscache.Store { return i.store }
func (i *storeInformer) HasSynced() bool            { return i.synced }

// informers hands out inf for every kind; the first GetInformer fails, as it
// does while the kind's CRD is missing.
type informers struct {
	cache.Informers
	inf *storeInformer
}

func (c informers) GetInformer(_ context.Context, _ client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	if c.inf.gets.Add(1) == 1 {
		return nil, errors.New("no matches for kind KubernetesProxy")
	}
	return c.inf, nil
}

func TestStateMetricsRecorded(t *testing.T) {
	ready := &kubernetesv1alpha1.KubernetesProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ready"}}
	ready.SetConditions(xpv2.Available(), xpv2.ReconcileSuccess())
	creating := &kubernetesv1alpha1.KubernetesProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "creating"}}
	creating.SetConditions(xpv2.Creating(), xpv2.ReconcileSuccess())
	inf := &storeInformer{store: toolscache.NewStore(toolscache.MetaNamespaceKeyFunc), synced: true}
	for _, o := range []client.Object{ready, creating} {
		if err := inf.store.Add(o); err != nil {
			t.Fatal(err)
		}
	}

	m := statemetrics.NewMRStateMetrics()
	mgr := &runnables{}
	kinds, err := managedKinds(kubernetesv1alpha1.SchemeBuilder.AddToScheme)
	if err != nil {
		t.Fatal(err)
	}
	if err := addStateRecorders(mgr, informers{inf: inf}, logging.NewNopLogger(), m, kinds, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if len(mgr.added) != 1 {
		t.Fatalf("addStateRecorders(...): added %d recorders, want 1", len(mgr.added))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.added[0].Start(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for inf.gets.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start(...): a failed count must not stop the recorder: %v", err)
	}
	// The label crossplane-runtime's own recorder gives them.
	gvk := "kubernetes.m.egressproxy.io/v1alpha1, Kind=KubernetesProxy"
	got := map[string]float64{
		"exists": testutil.ToFloat64(m.Exists.WithLabelValues(gvk)),
		"ready":  testutil.ToFloat64(m.Ready.WithLabelValues(gvk)),
		"synced": testutil.ToFloat64(m.Synced.WithLabelValues(gvk)),
	}
	if diff := cmp.Diff(map[string]float64{"exists": 2, "ready": 1, "synced": 2}, got); diff != "" {
		t.Errorf("crossplane_managed_resource_*{gvk=%q}: -want, +got:\n%s", gvk, diff)
	}
}

// TestStateMetricsCountInPlace shows that the recorders count the managed
// resources where the cache holds them, without a copy, and not before the
// informer has listed them all.
func TestStateMetricsCountInPlace(t *testing.T) {
	mg := &kubernetesv1alpha1.KubernetesProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "p"}}
	inf := &storeInformer{store: toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)}
	if err := inf.store.Add(mg); err != nil {
		t.Fatal(err)
	}
	inf.gets.Store(1) // no failing first GetInformer here
	items := storedItems(informers{inf: inf}, &kubernetesv1alpha1.KubernetesProxy{})
	if _, err := items(context.Background()); err == nil {
		t.Error("storedItems(...) before the informer listed: got no error, want one")
	}
	inf.synced = true
	got, err := items(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != any(mg) {
		t.Errorf("storedItems(...) = %v, want the store's own object %p", got, mg)
	}
}
