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
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/egressproxy/provider-egressproxy/internal/controller/phase"
)

const (
	errStateScheme   = "cannot build the scheme of the managed resource kinds"
	errStateRecorder = "cannot add a managed resource state metrics recorder"
)

// managedLists returns an empty list of every managed resource kind that
// addToScheme registers, so a new backend's kind gets state metrics
// without being named here.
func managedLists(addToScheme func(*runtime.Scheme) error) ([]resource.ManagedList, error) {
	s := runtime.NewScheme()
	if err := addToScheme(s); err != nil {
		return nil, errors.Wrap(err, errStateScheme)
	}
	var kinds []string
	byKind := map[string]resource.ManagedList{}
	for gvk := range s.AllKnownTypes() {
		o, err := s.New(gvk)
		if err != nil {
			continue
		}
		if l, ok := o.(resource.ManagedList); ok {
			kinds = append(kinds, gvk.String())
			byKind[gvk.String()] = l
		}
	}
	sort.Strings(kinds)
	out := make([]resource.ManagedList, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, byKind[k])
	}
	return out, nil
}

// stateRecorder records the crossplane_managed_resource_{exists,ready,synced}
// gauges of one kind every interval. Unlike statemetrics.MRStateRecorder's
// own Start, a failed List (say, the kind's CRD is not installed) is logged
// and retried at the next tick instead of stopping the whole manager.
type stateRecorder struct {
	r        *statemetrics.MRStateRecorder
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
			if err := s.r.Record(ctx); err != nil {
				s.log.Debug("Cannot record managed resource state metrics", "error", err)
			}
		}
	}
}

// addStateRecorders adds to mgr a state recorder for every managed resource
// kind, as the --poll-state-metric flag promises. A zero interval turns them
// off.
func addStateRecorders(mgr manager.Manager, c client.Client, log logging.Logger, m *statemetrics.MRStateMetrics, lists []resource.ManagedList, interval time.Duration) error {
	if interval <= 0 {
		return nil
	}
	for _, l := range lists {
		r := &stateRecorder{r: statemetrics.NewMRStateRecorder(uncopiedLists{c}, log, m, l, interval), log: log, interval: interval}
		if err := mgr.Add(r); err != nil {
			return errors.Wrap(err, errStateRecorder)
		}
	}
	return nil
}

// uncopiedLists lists from the cache without copying the objects: the
// recorder only counts conditions, every 5 s by default, and copying every
// managed resource for it was a twentieth of the CPU of 1000 idle
// resources (docs/bench.md).
type uncopiedLists struct {
	client.Client
}

func (c uncopiedLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.Client.List(ctx, list, append(opts, client.UnsafeDisableDeepCopy)...)
}
