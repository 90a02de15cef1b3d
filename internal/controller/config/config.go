/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package config runs the controllers that count the users of every
// ProviderConfig and ClusterProviderConfig, so a config in use cannot be
// deleted, and keeps a namespaced config and its credentials Secret until
// the managed resources that need them are gone.
package config

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/providerconfig"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
)

const errFmtNewObject = "cannot make an object of kind %s"

// Workers bounds the workers of each controller of configs; the managed
// resources' controllers keep --max-reconcile-rate. A config's reconcile
// counts its users from the cache and writes at most its status, and each
// worker is a goroutine whose stack lasts as long as the provider and is
// scanned by every garbage collection: at --max-reconcile-rate=100 the
// seven config controllers of three backends held 700 idle workers, and
// the provider's stacks went from 10.3 to 6.6 MB without them and the CRD
// gate's (docs/bench.md at 22cd24f, "fewer workers").
const Workers = 5

// options are o with at most Workers workers.
func options(o controller.Options) controller.Options {
	o.MaxConcurrentReconciles = min(o.MaxConcurrentReconciles, Workers)
	return o
}

// group is one backend's API group, whose objects come from the scheme by
// the kinds its description names.
type group struct {
	backend.Description
	scheme *runtime.Scheme
}

func (g group) object(gvk schema.GroupVersionKind) (client.Object, error) {
	o, err := g.scheme.New(gvk)
	if err != nil {
		return nil, errors.Wrapf(err, errFmtNewObject, gvk)
	}
	co, ok := o.(client.Object)
	if !ok {
		return nil, errors.Errorf(errFmtNewObject, gvk)
	}
	return co, nil
}

func (g group) managedList() (resource.ManagedList, error) {
	o, err := g.scheme.New(backend.ListOf(g.Managed))
	if err != nil {
		return nil, errors.Wrapf(err, errFmtNewObject, backend.ListOf(g.Managed))
	}
	l, ok := o.(resource.ManagedList)
	if !ok {
		return nil, errors.Errorf(errFmtNewObject, backend.ListOf(g.Managed))
	}
	return l, nil
}

func (g group) providerConfigList() (client.ObjectList, error) {
	gvk := backend.ListOf(g.ProviderConfig())
	o, err := g.scheme.New(gvk)
	if err != nil {
		return nil, errors.Wrapf(err, errFmtNewObject, gvk)
	}
	l, ok := o.(client.ObjectList)
	if !ok {
		return nil, errors.Errorf(errFmtNewObject, gvk)
	}
	return l, nil
}

// secretName returns the Secret a namespaced ProviderConfig reads from its
// own namespace, or "". Every backend's config names it at
// spec.credentials.secretRef.name.
func secretName(pc client.Object) string {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pc)
	if err != nil {
		return ""
	}
	name, _, _ := unstructured.NestedString(u, "spec", "credentials", "secretRef", "name")
	return name
}

// Setup adds the config controllers of every backend of registry.Backends at
// once. The provider adds each backend when its CRDs appear instead (see
// NewConfigs).
func Setup(mgr ctrl.Manager, o controller.Options) error {
	c, err := NewConfigs(mgr, o)
	if err != nil {
		return err
	}
	for _, b := range registry.Backends {
		if err := c.Add(b); err != nil {
			return err
		}
	}
	return nil
}

// Configs runs the InUse controller, and the users-counting controllers of
// the backends added to it.
type Configs struct {
	mgr   ctrl.Manager
	o     controller.Options
	inUse *inUseController
}

// NewConfigs adds the InUse controller, still watching no backend, to mgr.
func NewConfigs(mgr ctrl.Manager, o controller.Options) (*Configs, error) {
	c, err := setupInUse(mgr, o)
	if err != nil {
		return nil, err
	}
	return &Configs{mgr: mgr, o: o, inUse: c}, nil
}

// Add adds a users-counting controller for each config kind of b, and b's
// kinds to the InUse controller.
func (c *Configs) Add(b backend.Description) error {
	g := group{Description: b, scheme: c.mgr.GetScheme()}
	mg, err := g.object(b.Managed)
	if err != nil {
		return err
	}
	// Indexed before anything counts the group's resources, which needs
	// the index. The context only bounds waiting for an informer of a
	// cache that already runs; setup has none of its own.
	if err := c.mgr.GetFieldIndexer().IndexField(context.Background(), mg, indexConfigRef, configRefOf); err != nil {
		return errors.Wrap(err, errIndex)
	}
	for _, cfg := range []schema.GroupVersionKind{b.ProviderConfig(), b.ClusterProviderConfig()} {
		if err := setupUsers(c.mgr, c.o, g, cfg); err != nil {
			return err
		}
	}
	return c.inUse.add(c.mgr, g)
}

func setupUsers(mgr ctrl.Manager, o controller.Options, g group, config schema.GroupVersionKind) error {
	obj, err := g.object(config)
	if err != nil {
		return err
	}
	mg, err := g.object(g.Managed)
	if err != nil {
		return err
	}
	name := providerconfig.ControllerName(config.GroupKind().String())
	r := NewUsers(mgr.GetClient(), g, config, event.NewAPIRecorder(mgr.GetEventRecorderFor(name)))
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(options(o).ForControllerRuntime()).
		For(obj, builder.WithPredicates(inUseChanged())).
		Watches(mg, settled{h: toConfig(config), delay: usageSettle}, builder.WithPredicates(inUseChanged())).
		Complete(ratelimiter.NewReconciler(name, r, o.GlobalRateLimiter))
}

// toConfig enqueues the config of kind a managed resource refers to: in the
// resource's namespace for a ProviderConfig, cluster-wide for a
// ClusterProviderConfig. An update enqueues the config of the old and of
// the new resource, so a changed reference is counted on both.
func toConfig(kind schema.GroupVersionKind) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		m, ok := o.(resource.TypedProviderConfigReferencer)
		if !ok {
			return nil
		}
		ref := m.GetProviderConfigReference()
		if ref == nil || ref.Kind != kind.Kind {
			return nil
		}
		nn := types.NamespacedName{Name: ref.Name}
		if kind.Kind != backend.KindClusterProviderConfig {
			nn.Namespace = o.GetNamespace()
		}
		return []reconcile.Request{{NamespacedName: nn}}
	})
}
