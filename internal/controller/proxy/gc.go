/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

const (
	errListOwners  = "cannot list managed resources"
	errListConfigs = "cannot list provider configs"
)

// resultError is the result label of an instance whose Delete failed.
const resultError = "error"

// gcInstances counts what the garbage collector decided about each listed
// instance, so an operator sees that another installation's instances are
// skipped rather than collected. It is registered with controller-runtime's
// registry, which the manager serves.
var gcInstances = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "egressproxy_gc_instances_total",
	Help: "Instances seen by the garbage collector, by backend and result: deleted, skipped_foreign, skipped_live, skipped_young or error.",
}, []string{"backend", "result"})

func init() {
	metrics.Registry.MustRegister(gcInstances)
}

// Collector deletes instances whose managed resource is gone: the backend
// lists what carries this provider's labels, and what is marked as this
// provider instance's, no resource owns and is older than a minimum age is
// deleted (backend.Judge). It catches what a crash, a forced
// finalizer removal or a restored backup left behind.
type Collector[P, O any] struct {
	kube       client.Client
	newBackend BackendFactory[P, O]
	// newOwners returns an empty list of the managed resource kind.
	newOwners func() client.ObjectList
	// newConfigs returns empty lists of ProviderConfigs and ClusterProviderConfigs.
	newConfigs       func() (pcs, cpcs client.ObjectList)
	backend          string
	providerInstance string
	minAge, interval time.Duration
	log              logging.Logger
	now              func() time.Time
	instr            *backend.Instrumentation
	timeout          time.Duration
}

// CollectorConfig is what a Collector needs.
type CollectorConfig[P, O any] struct {
	// Backend names the backend in the GC metric, as in the backend call
	// metrics.
	Backend    string
	Kube       client.Client
	NewBackend BackendFactory[P, O]
	NewOwners  func() client.ObjectList
	NewConfigs func() (pcs, cpcs client.ObjectList)
}

// NewCollector returns a Collector that runs every o.GCInterval.
func NewCollector[P, O any](c CollectorConfig[P, O], o Options) *Collector[P, O] {
	return &Collector[P, O]{
		backend: c.Backend, kube: c.Kube, newBackend: c.NewBackend, newOwners: c.NewOwners, newConfigs: c.NewConfigs,
		providerInstance: o.ProviderInstance, minAge: o.GCMinAge, interval: o.GCInterval,
		log: o.Logger, now: time.Now, instr: instrumentation(o), timeout: configTimeout(o),
	}
}

// instrumentation is the one the reconcilers use: GC's List and Delete are
// backend calls like any other, counted, timed and traced the same way.
func instrumentation(o Options) *backend.Instrumentation {
	if o.Instrumentation != nil {
		return o.Instrumentation
	}
	return backend.NewInstrumentation()
}

// configTimeout bounds the work of a round on one config, so a backend that
// hangs (a libvirt host that accepts and never answers) cannot stop the
// collection of every other config, nor later rounds: an interval, but at
// least a minute.
func configTimeout(o Options) time.Duration {
	if o.GCInterval > time.Minute {
		return o.GCInterval
	}
	return time.Minute
}

// NeedLeaderElection makes only the leader collect.
func (c *Collector[P, O]) NeedLeaderElection() bool { return true }

// Start collects every interval until ctx is done.
func (c *Collector[P, O]) Start(ctx context.Context) error {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			n, err := c.Collect(ctx)
			if err != nil {
				c.log.Info("Garbage collection incomplete", "error", err, "deleted", n)
			} else if n > 0 {
				c.log.Info("Garbage collected orphan instances", "deleted", n)
			}
		}
	}
}

// Collect runs one round and returns how many instances it deleted. A
// config whose backend cannot be listed is skipped, never taken as empty.
func (c *Collector[P, O]) Collect(ctx context.Context) (int, error) {
	owners, err := c.owners(ctx)
	if err != nil {
		return 0, err
	}
	configs, err := c.configs(ctx)
	if err != nil {
		return 0, err
	}
	exists := func(uid types.UID) bool { return owners[uid] }
	seen := map[string]bool{}
	deleted := 0
	var last error
	for _, cfg := range configs {
		n, err := c.collect(ctx, cfg, exists, seen)
		deleted += n
		if err != nil {
			last = err
		}
	}
	return deleted, last
}

// collect collects the orphans of one config, within c.timeout.
func (c *Collector[P, O]) collect(ctx context.Context, cfg Config, exists func(types.UID) bool, seen map[string]bool) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	raw, err := c.newBackend(ctx, c.kube, cfg)
	if err != nil {
		return 0, err
	}
	b := backend.Instrument(c.instr, c.backend, raw)
	instances, err := b.List(ctx)
	if err != nil {
		return 0, err
	}
	deleted := 0
	var last error
	for _, in := range instances {
		if seen[in.ID] {
			continue
		}
		seen[in.ID] = true
		v := backend.Judge(in, c.providerInstance, exists, c.minAge, c.now())
		if v != backend.VerdictCollect {
			gcInstances.WithLabelValues(c.backend, string(v)).Inc()
			continue
		}
		if err := b.Delete(ctx, backend.Desired[P]{Name: in.Name, Ownership: in.Ownership}); err != nil {
			gcInstances.WithLabelValues(c.backend, resultError).Inc()
			last = err
			continue
		}
		gcInstances.WithLabelValues(c.backend, string(v)).Inc()
		deleted++
	}
	return deleted, last
}

func (c *Collector[P, O]) owners(ctx context.Context) (map[types.UID]bool, error) {
	l := c.newOwners()
	if err := c.kube.List(ctx, l); err != nil {
		return nil, errors.Wrap(err, errListOwners)
	}
	objs, err := meta.ExtractList(l)
	if err != nil {
		return nil, errors.Wrap(err, errListOwners)
	}
	uids := make(map[types.UID]bool, len(objs))
	for _, o := range objs {
		if m, ok := o.(client.Object); ok {
			uids[m.GetUID()] = true
		}
	}
	return uids, nil
}

func (c *Collector[P, O]) configs(ctx context.Context) ([]Config, error) {
	pcs, cpcs := c.newConfigs()
	var out []Config
	for _, l := range []client.ObjectList{pcs, cpcs} {
		if err := c.kube.List(ctx, l); err != nil {
			return nil, errors.Wrap(err, errListConfigs)
		}
		err := listObjects(l, func(o client.Object) {
			out = append(out, Config{Object: o, SecretNamespace: o.GetNamespace()})
		})
		if err != nil {
			return nil, errors.Wrap(err, errListConfigs)
		}
	}
	return out, nil
}

// listObjects calls fn with each object of a list.
func listObjects(l client.ObjectList, fn func(client.Object)) error {
	objs, err := meta.ExtractList(l)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if co, ok := o.(client.Object); ok {
			fn(co)
		}
	}
	return nil
}
