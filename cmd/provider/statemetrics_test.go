/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/egressproxy/provider-egressproxy/apis"
	kubernetesv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
)

func TestStateMetricsKinds(t *testing.T) {
	lists, err := managedLists(apis.AddToScheme)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lists {
		got = append(got, strings.TrimSuffix(reflect.TypeOf(l).Elem().Name(), "List"))
	}
	sort.Strings(got)
	// Every managed resource kind of the provider, and nothing else (no
	// ProviderConfigUsage, which is a list too).
	want := []string{"GCPProxy", "KVMProxy", "KubernetesProxy"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("managedLists(apis.AddToScheme): -want, +got:\n%s", diff)
	}
}

func TestStateMetricsRecorded(t *testing.T) {
	s := runtime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	ready := &kubernetesv1alpha1.KubernetesProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ready"}}
	ready.SetConditions(xpv2.Available(), xpv2.ReconcileSuccess())
	creating := &kubernetesv1alpha1.KubernetesProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "creating"}}
	creating.SetConditions(xpv2.Creating(), xpv2.ReconcileSuccess())

	// The first List fails, as it does while the kind's CRD is missing: the
	// recorder must go on rather than stop the manager.
	var lists atomic.Int32
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(ready, creating).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
			if lists.Add(1) == 1 {
				return errors.New("no matches for kind KubernetesProxy")
			}
			return c.List(ctx, l, o...)
		},
	}).Build()
	m := statemetrics.NewMRStateMetrics()
	r := &stateRecorder{
		r:        statemetrics.NewMRStateRecorder(c, logging.NewNopLogger(), m, &kubernetesv1alpha1.KubernetesProxyList{}, time.Millisecond),
		log:      logging.NewNopLogger(),
		interval: time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for lists.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start(...): a failed List must not stop the recorder: %v", err)
	}
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

// runnables is a manager that only collects what is added to it.
type runnables struct {
	manager.Manager
	added []manager.Runnable
}

func (m *runnables) Add(r manager.Runnable) error {
	m.added = append(m.added, r)
	return nil
}

// TestStateMetricsListsUncopied shows that the recorders list the managed
// resources without copying them out of the cache: they only count
// conditions, every few seconds.
func TestStateMetricsListsUncopied(t *testing.T) {
	s := runtime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	var copied, uncopied atomic.Int32
	c := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
			lo := &client.ListOptions{}
			lo.ApplyOptions(o)
			if lo.UnsafeDisableDeepCopy != nil && *lo.UnsafeDisableDeepCopy {
				uncopied.Add(1)
			} else {
				copied.Add(1)
			}
			return c.List(ctx, l, o...)
		},
	}).Build()
	m := &runnables{}
	if err := addStateRecorders(m, c, logging.NewNopLogger(), statemetrics.NewMRStateMetrics(), []resource.ManagedList{&kubernetesv1alpha1.KubernetesProxyList{}}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, len(m.added))
	for _, r := range m.added {
		go func() { done <- r.Start(ctx) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for uncopied.Load()+copied.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	for range m.added {
		<-done
	}
	if copied.Load() != 0 || uncopied.Load() == 0 {
		t.Errorf("the state recorders listed %d times with copies and %d without, want only without", copied.Load(), uncopied.Load())
	}
}
