/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"
	"sort"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/egressproxy/provider-egressproxy/internal/controller/phase"
)

const (
	errStateScheme   = "cannot build the scheme of the managed resource kinds"
	errStateRecorder = "cannot add a managed resource state metrics recorder"
	errStateInformer = "cannot get the informer of a managed resource kind"
	errStateStore    = "the informer of a managed resource kind has no store to count"
	errStateSynced   = "the informer of a managed resource kind has not listed yet"
)

// A managedKind is a managed resource kind and an empty object of it.
type managedKind struct {
	gvk schema.GroupVersionKind
	obj resource.Managed
}

// managedKinds returns every managed resource kind that addToScheme
// registers, so a new backend's kind gets state metrics without being named
// here.
func managedKinds(addToScheme func(*runtime.Scheme) error) ([]managedKind, error) {
	s := runtime.NewScheme()
	if err := addToScheme(s); err != nil {
		return nil, errors.Wrap(err, errStateScheme)
	}
	var out []managedKind
	for gvk := range s.AllKnownTypes() {
		o, err := s.New(gvk)
		if err != nil {
			continue
		}
		if mg, ok := o.(resource.Managed); ok {
			out = append(out, managedKind{gvk: gvk, obj: mg})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].gvk.String() < out[j].gvk.String() })
	return out, nil
}

// stateRecorder records the crossplane_managed_resource_{exists,ready,synced}
// gauges of one kind every interval, with the labels crossplane-runtime's
// MRStateRecorder gives them. It counts the objects in the cache's store
// where they are: the runtime's recorder lists them into a typed list, a
// copy of every managed resource every 5 s, which was a twelfth of what a
// steady poll of 1000 proxies allocated (docs/bench.md at 22cd24f). A failed count
// (say, the kind's CRD is not installed) is logged and tried again at the
// next tick instead of stopping the whole manager.
type stateRecorder struct {
	// items returns the managed resources of the kind; they are read only.
	items    func(ctx context.Context) ([]any, error)
	metrics  *statemetrics.MRStateMetrics
	labels   prometheus.Labels
	log      logging.Logger
	interval time.Duration
}

// Start implements manager.Runnable.
func (s *stateRecorder) Start(ctx context.Context) error {
	// Ticks with the work queues' timers: one wake-up serves all.
	phase.Wait(ctx, s.interval)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := s.record(ctx); err != nil {
				s.log.Debug("Cannot record managed resource state metrics", "error", err)
			}
		}
	}
}

func (s *stateRecorder) record(ctx context.Context) error {
	items, err := s.items(ctx)
	if err != nil {
		return err
	}
	var exists, ready, synced float64
	for _, o := range items {
		mg, ok := o.(resource.Managed)
		if !ok {
			continue
		}
		exists++
		if mg.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue {
			ready++
		}
		if mg.GetCondition(xpv2.TypeSynced).Status == corev1.ConditionTrue {
			synced++
		}
	}
	s.metrics.Exists.With(s.labels).Set(exists)
	s.metrics.Ready.With(s.labels).Set(ready)
	s.metrics.Synced.With(s.labels).Set(synced)
	return nil
}

// storedItems returns what the informer of obj's kind holds, the store's
// own objects, once it has listed.
func storedItems(c cache.Informers, obj resource.Managed) func(ctx context.Context) ([]any, error) {
	return func(ctx context.Context) ([]any, error) {
		inf, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return nil, errors.Wrap(err, errStateInformer)
		}
		st, ok := inf.(interface{ GetStore() toolscache.Store })
		if !ok {
			return nil, errors.New(errStateStore)
		}
		if !inf.HasSynced() {
			// A partial count would be a wrong one.
			return nil, errors.New(errStateSynced)
		}
		return st.GetStore().List(), nil
	}
}

// addStateRecorders adds to mgr a state recorder for every managed resource
// kind, as the --poll-state-metric flag promises. A zero interval turns them
// off.
func addStateRecorders(mgr manager.Manager, c cache.Informers, log logging.Logger, m *statemetrics.MRStateMetrics, kinds []managedKind, interval time.Duration) error {
	if interval <= 0 {
		return nil
	}
	for _, k := range kinds {
		r := &stateRecorder{
			items:   storedItems(c, k.obj),
			metrics: m,
			// What crossplane-runtime's recorder labels them with.
			labels:   prometheus.Labels{"gvk": k.gvk.String()},
			log:      log,
			interval: interval,
		}
		if err := mgr.Add(r); err != nil {
			return errors.Wrap(err, errStateRecorder)
		}
	}
	return nil
}
