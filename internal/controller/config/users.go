/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package config

import (
	"context"
	"fmt"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/providerconfig"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// FinalizerInUse holds a ProviderConfig or ClusterProviderConfig while a
// managed resource refers to it. It is the name Crossplane's own config
// reconciler gives its finalizer, so configs made before the provider
// counted users this way keep theirs.
const FinalizerInUse = "in-use.crossplane.io"

const (
	reasonUsers event.Reason = "UsageAccounting"

	errGetConfig    = "cannot get the provider config"
	errUpdateConfig = "cannot update the finalizers of the provider config"
	errUpdateUsers  = "cannot update the status of the provider config"
	errFmtBlocking  = "Blocking deletion while %d managed resources use it"
)

// Users counts the managed resources that refer to a config of one kind,
// writes the count to its status.users, and holds it with FinalizerInUse
// while the count is not zero.
//
// The count is read from the cache's index of managed resources by their
// providerConfigRef (indexConfigRef), not from ProviderConfigUsages:
// Crossplane's tracker writes a usage for every managed resource, one write
// more per new proxy (a tenth of what a new KubernetesProxy writes), and a
// namespace being deleted loses its usages at once, before the resources
// that need the config. A managed resource exists until it has deleted
// what it made, so counting them is what a config must wait for.
type Users struct {
	client client.Client
	group  group
	kind   schema.GroupVersionKind
	record event.Recorder
}

// NewUsers returns a Users of configs of kind, of backend group g.
func NewUsers(c client.Client, g group, kind schema.GroupVersionKind, r event.Recorder) *Users {
	return &Users{client: c, group: g, kind: kind, record: r}
}

// Reconcile counts the users of the config req names. It writes only what
// changes: with N new proxies converging, the config is counted every
// usageSettle, and a count that did not move writes nothing.
//
// A conflict is requeued without an error: the health check patches the
// same status (health.go), so at a start the two writes of a new config
// meet, and counting again from the cache is all a conflict asks for.
func (r *Users) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return errors.SilentlyRequeueOnConflict(r.reconcile(ctx, req))
}

func (r *Users) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	o, err := r.group.object(r.kind)
	if err != nil {
		return reconcile.Result{}, err
	}
	pc, ok := o.(resource.ProviderConfig)
	if !ok {
		return reconcile.Result{}, errors.Errorf(errFmtNewObject, r.kind)
	}
	if err := r.client.Get(ctx, req.NamespacedName, pc); err != nil {
		return reconcile.Result{}, errors.Wrap(resource.IgnoreNotFound(err), errGetConfig)
	}
	users, err := r.count(ctx, req)
	if err != nil {
		return reconcile.Result{}, err
	}

	if meta.WasDeleted(pc) && users == 0 {
		if !meta.FinalizerExists(pc, FinalizerInUse) {
			return reconcile.Result{}, nil
		}
		meta.RemoveFinalizer(pc, FinalizerInUse)
		return reconcile.Result{}, errors.Wrap(resource.IgnoreNotFound(r.client.Update(ctx, pc)), errUpdateConfig)
	}
	if !meta.WasDeleted(pc) && !meta.FinalizerExists(pc, FinalizerInUse) {
		meta.AddFinalizer(pc, FinalizerInUse)
		if err := r.client.Update(ctx, pc); err != nil {
			return reconcile.Result{}, errors.Wrap(err, errUpdateConfig)
		}
	}

	stored, before := pc.GetUsers(), pc.GetCondition(providerconfig.TypeTerminating)
	pc.SetUsers(users)
	if meta.WasDeleted(pc) {
		msg := fmt.Sprintf(errFmtBlocking, users)
		pc.SetConditions(providerconfig.Terminating().WithMessage(msg))
		if !before.Equal(pc.GetCondition(providerconfig.TypeTerminating)) {
			// Once per count, not once per reconcile.
			r.record.Event(pc, event.Warning(reasonUsers, errors.New(msg)))
		}
	}
	if users == stored && before.Equal(pc.GetCondition(providerconfig.TypeTerminating)) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, errors.Wrap(resource.IgnoreNotFound(r.client.Status().Update(ctx, pc)), errUpdateUsers)
}

// count returns how many managed resources of the group refer to the
// config req names: of its own namespace for a ProviderConfig, of every
// namespace for a ClusterProviderConfig. A resource being deleted counts:
// it needs the config to delete what it made.
func (r *Users) count(ctx context.Context, req reconcile.Request) (int64, error) {
	mrs, err := r.group.managedList()
	if err != nil {
		return 0, err
	}
	opts := []client.ListOption{client.MatchingFields{indexConfigRef: r.kind.Kind + "/" + req.Name}, client.UnsafeDisableDeepCopy}
	if req.Namespace != "" {
		opts = append(opts, client.InNamespace(req.Namespace))
	}
	if err := r.client.List(ctx, mrs, opts...); err != nil {
		return 0, errors.Wrap(err, errListManaged)
	}
	return int64(len(mrs.GetItems())), nil
}
