/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package config

import (
	"context"
	"slices"
	"sync"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Finalizers that keep what a proxy needs to be deleted until it is
// deleted. Deleting a namespace deletes everything in it at once: without
// them the config's credentials Secret would go before the proxies that
// need it to delete their instances, and those proxies would wait forever.
// The config itself is held by FinalizerInUse (Users).
const (
	// FinalizerConfigInUse held a namespaced ProviderConfig while a
	// managed resource of its namespace referred to it, while
	// FinalizerInUse counted ProviderConfigUsages, which a namespace being
	// deleted loses at once. FinalizerInUse counts the resources now; InUse
	// removes this one from the configs of earlier versions.
	FinalizerConfigInUse = "egressproxy.io/in-use-by-managed-resource"
	// FinalizerSecretInUse stays on a Secret while a namespaced
	// ProviderConfig of its namespace refers to it. Secrets of other
	// namespaces are never touched.
	FinalizerSecretInUse = "egressproxy.io/in-use-by-providerconfig"
)

const (
	inUseControllerName = "inuse.egressproxy.io"

	errListManaged  = "cannot list managed resources"
	errListConfigs  = "cannot list provider configs"
	errListSecrets  = "cannot list Secrets"
	errFmtGetSecret = "cannot get Secret %q"
	errIndex        = "cannot index the cache for the in-use finalizers"
	errFmtFinalize  = "cannot update the finalizers of %s %s/%s"
)

// InUse keeps FinalizerSecretInUse right, and removes FinalizerConfigInUse,
// in one namespace per reconcile: the request names the namespace.
type InUse struct {
	client client.Client

	// groups are the backends added so far: with safe-start, a backend is
	// added only once its CRDs are there.
	mu     sync.RWMutex
	groups []group
}

func (r *InUse) current() []group {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.groups)
}

// Fields of the cache's indexes: a reconcile reads only the resources of
// the configs of its namespace and the Secrets that hold its finalizer. It
// runs on every change of a managed resource or Secret of the namespace, so
// a reconcile that read them all was O(N) per change, O(N²) while N new
// resources converge: a fifth of the provider's CPU at N=1000.
const (
	// indexConfigRef holds a managed resource's <kind>/<name> of its
	// providerConfigRef.
	indexConfigRef = "inuse.egressproxy.io/providerconfigref"
	// indexHeld holds "true" for a Secret with FinalizerSecretInUse.
	indexHeld = "inuse.egressproxy.io/held"
)

// configRefOf is the indexConfigRef value of a managed resource.
func configRefOf(o client.Object) []string {
	m, ok := o.(resource.TypedProviderConfigReferencer)
	if !ok {
		return nil
	}
	ref := m.GetProviderConfigReference()
	if ref == nil {
		return nil
	}
	return []string{ref.Kind + "/" + ref.Name}
}

// heldOf is the indexHeld value of a Secret.
func heldOf(o client.Object) []string {
	if meta.FinalizerExists(o, FinalizerSecretInUse) {
		return []string{"true"}
	}
	return nil
}

// Reconcile sets or removes the finalizers of the Secrets, and removes
// FinalizerConfigInUse from the configs, of the namespace req.Name. A
// conflict (finalize's patches carry the version read) is requeued without
// an error: the next pass reads the newer object.
func (r *InUse) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return errors.SilentlyRequeueOnConflict(r.reconcile(ctx, req))
}

func (r *InUse) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := req.Name
	secrets := map[string]bool{}
	for _, g := range r.current() {
		pcs, err := g.providerConfigList()
		if err != nil {
			return reconcile.Result{}, err
		}
		if err := r.client.List(ctx, pcs, client.InNamespace(ns)); err != nil {
			return reconcile.Result{}, errors.Wrap(err, errListConfigs)
		}
		err = apimeta.EachListItem(pcs, func(o runtime.Object) error {
			pc, ok := o.(client.Object)
			if !ok {
				return nil
			}
			// A config being deleted still serves the resources that hold
			// it up, so its Secret stays too.
			if name := secretName(pc); name != "" {
				secrets[name] = true
			}
			return r.finalize(ctx, pc, FinalizerConfigInUse, false)
		})
		if err != nil {
			return reconcile.Result{}, err
		}
	}
	// Uncopied: only a Secret whose finalizer changes is copied before
	// finalize changes it, the cache's own must stay as they are.
	held := &corev1.SecretList{}
	if err := r.client.List(ctx, held, client.InNamespace(ns), client.MatchingFields{indexHeld: "true"}, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, errors.Wrap(err, errListSecrets)
	}
	for i := range held.Items {
		if secrets[held.Items[i].GetName()] {
			continue
		}
		if err := r.finalize(ctx, held.Items[i].DeepCopy(), FinalizerSecretInUse, false); err != nil {
			return reconcile.Result{}, err
		}
	}
	for name := range secrets {
		s := &corev1.Secret{}
		err := r.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s)
		if kerrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return reconcile.Result{}, errors.Wrapf(err, errFmtGetSecret, name)
		}
		if err := r.finalize(ctx, s, FinalizerSecretInUse, true); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

// finalize adds or removes finalizer f of o. The patch carries o's
// resource version, so it never drops a finalizer someone else just set.
func (r *InUse) finalize(ctx context.Context, o client.Object, f string, want bool) error {
	if meta.FinalizerExists(o, f) == want {
		return nil
	}
	if want && meta.WasDeleted(o) {
		// A finalizer cannot be added to an object being deleted.
		return nil
	}
	before, ok := o.DeepCopyObject().(client.Object)
	if !ok {
		return nil
	}
	if want {
		meta.AddFinalizer(o, f)
	} else {
		meta.RemoveFinalizer(o, f)
	}
	err := r.client.Patch(ctx, o, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	return errors.Wrapf(resource.IgnoreNotFound(err), errFmtFinalize, kindOf(o), o.GetNamespace(), o.GetName())
}

func kindOf(o client.Object) string {
	if _, ok := o.(*corev1.Secret); ok {
		return "Secret"
	}
	return "ProviderConfig"
}

// inUseController is the InUse controller, to which backends are added.
type inUseController struct {
	r    *InUse
	c    crcontroller.Controller
	opts controller.Options
}

// setupInUse adds the InUse controller, which watches the Secrets, and the
// namespaced ProviderConfigs of each backend added, of every namespace.
func setupInUse(mgr ctrl.Manager, o controller.Options) (*inUseController, error) {
	// The context only bounds waiting for an informer of a cache that
	// already runs; setup has none of its own.
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Secret{}, indexHeld, heldOf); err != nil {
		return nil, errors.Wrap(err, errIndex)
	}
	r := &InUse{client: mgr.GetClient()}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(inUseControllerName).
		WithOptions(options(o).ForControllerRuntime()).
		WithEventFilter(inUseChanged()).
		Watches(&corev1.Secret{}, toNamespace()).
		Build(ratelimiter.NewReconciler(inUseControllerName, r, o.GlobalRateLimiter))
	if err != nil {
		return nil, err
	}
	return &inUseController{r: r, c: c, opts: o}, nil
}

// add watches the ProviderConfigs of g and keeps their Secrets from the
// next reconcile on. A watch added after the manager started starts at once.
func (c *inUseController) add(mgr ctrl.Manager, g group) error {
	pc, err := g.object(g.ProviderConfig())
	if err != nil {
		return err
	}
	c.r.mu.Lock()
	c.r.groups = append(c.r.groups, g)
	c.r.mu.Unlock()
	return c.c.Watch(source.Kind(mgr.GetCache(), pc, toNamespace(), inUseChanged()))
}

// toNamespace enqueues the namespace of a namespaced object.
func toNamespace() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if o.GetNamespace() == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
	})
}

// inUseChanged passes creations, deletions and the updates that can change
// a finalizer InUse keeps: a new spec (a reference), a new deletion
// timestamp or finalizers. Status updates, frequent on managed resources,
// are not worth a reconcile.
func inUseChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetGeneration() != n.GetGeneration() ||
			!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) ||
			!slices.Equal(o.GetFinalizers(), n.GetFinalizers())
	}}
}
