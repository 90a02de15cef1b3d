/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

const errFmtNoBackend = "the %s backend is not available in this build of the provider"

// BackendFactory builds (or returns a cached) backend for a resolved
// provider config.
type BackendFactory[P, O any] func(ctx context.Context, kube client.Client, cfg Config) (backend.Backend[P, O], error)

// Connector connects managed resources of one kind to their backend: it
// resolves the provider config and hands the backend to an External. It
// holds no CRUD logic, as in provider-kubernetes.
type Connector[M resource.ModernManaged, P, O any] struct {
	kube        client.Client
	kind        Kind[M, P, O]
	backendName string
	policy      BackendPolicy
	newConfigs  func() (pc, cpc client.Object)
	newBackend  BackendFactory[P, O]
	opts        Options
	changes     *Changes
	namespaces  *namespaces
}

// ConnectorConfig is what a Connector needs.
type ConnectorConfig[M resource.ModernManaged, P, O any] struct {
	// Kube is the client of the control plane.
	Kube client.Client
	// Kind adapts the managed resource kind.
	Kind Kind[M, P, O]
	// Backend names the backend in messages and metrics.
	Backend string
	// Policy is the backend's own policy check, its description's Policy.
	// Without one every resource that is not being deleted is refused.
	Policy BackendPolicy
	// NewConfigs returns empty ProviderConfig and ClusterProviderConfig
	// objects of the group.
	NewConfigs func() (pc, cpc client.Object)
	// NewBackend builds the backend; nil while the backend is not built in.
	NewBackend BackendFactory[P, O]
	// APIReader reads from the API server, not the cache: the manager's
	// APIReader. It tells whether the provider may read namespaces before
	// Kube's cache starts an informer on them; nil reads them from Kube.
	APIReader client.Reader
}

// NewConnector returns a Connector.
func NewConnector[M resource.ModernManaged, P, O any](c ConnectorConfig[M, P, O], o Options) *Connector[M, P, O] {
	return &Connector[M, P, O]{
		kube:        c.Kube,
		kind:        c.Kind,
		backendName: c.Backend,
		policy:      c.Policy,
		newConfigs:  c.NewConfigs,
		newBackend:  c.NewBackend,
		opts:        o,
		changes:     NewChanges(o.ProviderInstance),
		namespaces:  &namespaces{cache: c.Kube, direct: c.APIReader},
	}
}

// Changes are the changes the connector's watching backends report; Setup
// makes them a source of the controller.
func (c *Connector[M, P, O]) Changes() *Changes { return c.changes }

// Connect returns an external client for mg.
func (c *Connector[M, P, O]) Connect(ctx context.Context, mg M) (managed.TypedExternalClient[M], error) {
	pc, cpc := c.newConfigs()
	cfg, err := ResolveConfig(ctx, c.kube, mg, pc, cpc)
	if err != nil {
		return nil, err
	}
	// Checked on every connect, so nothing is created or changed for a
	// resource the policy refuses, and one that breaks a policy changed
	// since says so. A resource being deleted is not checked: whatever it
	// made must still go.
	if !meta.WasDeleted(mg) {
		if err := checkPolicy(ctx, c.namespaces, mg, cfg, c.kind.Proxy(mg), c.kind.Params(mg), c.policy); err != nil {
			return nil, err
		}
	}
	if c.newBackend == nil {
		return nil, backend.Permanent(errors.Errorf(errFmtNoBackend, c.backendName))
	}
	b, err := c.newBackend(ctx, c.kube, cfg)
	if err != nil {
		return nil, err
	}
	if w, ok := b.(backend.Watcher); ok {
		// Cheap, and the backend may be new (a changed provider config).
		w.Watch(c.changes.Notify)
		c.changes.watched.Store(true)
	}
	i := c.opts.Instrumentation
	if i == nil {
		i = backend.NewInstrumentation()
	}
	e := NewExternal(c.kind, backend.Instrument(i, c.backendName, b), c.kube, c.opts.ProviderInstance, c.opts.CredentialsKey).WithTraffic(c.opts.Traffic, c.backendName)
	e.allowedPrivate = allowedPrivate(cfg)
	return Traced[M](c.backendName, e), nil
}

// CommonObservation returns the fields every proxy kind reports.
func CommonObservation[O any](o backend.Observation[O]) commonv1alpha1.ProxyObservation {
	po := commonv1alpha1.ProxyObservation{
		Endpoint:       o.Endpoint,
		EgressIPs:      o.EgressIPs,
		InstanceID:     o.ID,
		State:          o.State,
		ConfigChecksum: o.ConfigChecksum,
	}
	if !o.CreatedAt.IsZero() {
		t := metaTime(o.CreatedAt)
		po.CreatedAt = &t
	}
	return po
}
