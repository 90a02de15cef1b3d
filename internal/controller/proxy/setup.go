/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// Options configure every proxy controller.
type Options struct {
	controller.Options

	// ProviderInstance names this provider deployment in the ownership
	// labels, so deployments sharing a backend never touch each other's
	// instances.
	ProviderInstance string

	// CredentialsKey is the key generated passwords are derived with, at
	// least MinCredentialsKey bytes; the same key gives every resource
	// the same password again.
	CredentialsKey []byte

	// Instrumentation counts, times and traces every backend call.
	Instrumentation *backend.Instrumentation

	// Traffic gets the data plane's traffic each Observe reads; nil drops
	// it.
	Traffic *TrafficMetrics

	// Timeout bounds one reconcile, and so every backend call in it.
	Timeout time.Duration

	// GCInterval is how often orphan instances are collected; zero turns
	// garbage collection off.
	GCInterval time.Duration

	// GCMinAge is how old an orphan must be before it is collected, so an
	// instance whose resource is not in the cache yet is never deleted.
	GCMinAge time.Duration

	// HealthInterval is how often the backend of every provider config is
	// checked; zero turns health checks off.
	HealthInterval time.Duration

	// WatchedPollInterval replaces PollInterval for resources whose backend
	// watches its instances (backend.Watcher): changes arrive through the
	// watch, and the poll only backs it up. Zero keeps PollInterval. A
	// resource's own poll-interval annotation wins over both.
	WatchedPollInterval time.Duration

	// TrafficInterval caps WatchedPollInterval: the traffic metrics are
	// read on Observe, and a watch reports no traffic, so without it a
	// watched proxy's counts would be as old as its poll. Zero leaves
	// WatchedPollInterval alone.
	TrafficInterval time.Duration

	// NormalEvents records the managed reconciler's Normal events too
	// (creation, update or deletion requested); otherwise only warnings.
	NormalEvents bool

	// PollJitter moves each poll up to this much earlier or later, at most
	// a tenth of the poll interval, so resources created together do not
	// poll together forever.
	PollJitter time.Duration
}

// maxJitterFraction caps the jitter at a tenth of the poll interval, so a
// jitter meant for a long poll does not make a short one erratic.
const maxJitterFraction = 10

// pollHook returns the poll interval of a resource: the watched interval
// once watched says the backend watches, and the jitter.
func pollHook(o Options, watched func() bool) managed.PollIntervalHook {
	return func(mg resource.Managed, poll time.Duration) time.Duration {
		if _, own := meta.GetPollInterval(mg); !own && o.WatchedPollInterval > 0 && watched() {
			poll = o.WatchedPollInterval
			if o.TrafficInterval > 0 {
				poll = min(poll, o.TrafficInterval)
			}
		}
		j := min(o.PollJitter, poll/maxJitterFraction)
		if j <= 0 {
			return poll
		}
		return poll + time.Duration((rand.Float64()*2-1)*float64(j)) //nolint:gosec // Jitter needs no secure randomness.
	}
}

// recorder returns r, or r without Normal events unless normal is true. The
// managed reconciler's Normal events only say that a call it made
// succeeded ("Successfully requested creation of external resource"),
// which the Synced and Ready conditions say too: one write per new
// resource, one per update, for nothing a condition lacks. Warnings, which
// carry errors, are always recorded.
func recorder(r event.Recorder, normal bool) event.Recorder {
	if normal {
		return r
	}
	return warningsOnly{Recorder: r}
}

type warningsOnly struct {
	event.Recorder
}

func (w warningsOnly) Event(obj runtime.Object, e event.Event) {
	if e.Type == event.TypeNormal {
		return
	}
	w.Recorder.Event(obj, e)
}

// WithAnnotations keeps the filter: the reconciler records its creation
// event through an annotated recorder.
func (w warningsOnly) WithAnnotations(keysAndValues ...string) event.Recorder {
	return warningsOnly{Recorder: w.Recorder.WithAnnotations(keysAndValues...)}
}

const (
	errFmtNoList        = "cannot list resources of kind %s: the scheme does not know it"
	errIndexCredentials = "cannot index managed resources by their credentials Secret"
)

// indexCredentialsRef holds the name of the credentials Secret a managed
// resource uses (spec.forProvider.credentialsSecretRef).
const indexCredentialsRef = "proxy.egressproxy.io/credentialssecretref"

// watching is a connector whose backends may report changes.
type watching interface {
	Changes() *Changes
}

// Setup registers the managed reconciler of one proxy kind, served by c.
// credentialsRef names the credentials Secret a resource uses, "" for none.
func Setup[M resource.ModernManaged](mgr ctrl.Manager, o Options, gvk schema.GroupVersionKind, obj M, c managed.TypedExternalConnector[M], maxNameLen int, credentialsRef func(M) string) error {
	name := managed.ControllerName(gvk.GroupKind().String())
	opts := []managed.ReconcilerOption{
		managed.WithTypedExternalConnector[M](c),
		managed.WithLogger(o.Logger.WithValues("controller", name)),
		managed.WithPollInterval(o.PollInterval),
		managed.WithRecorder(recorder(event.NewAPIRecorder(mgr.GetEventRecorderFor(name)), o.NormalEvents)),
		managed.WithInitializers(NameInitializer(maxNameLen)),
		// Names are derived from the resource, so a crash during Create
		// loses nothing: the next Create finds and finishes the instance.
		managed.WithDeterministicExternalName(true),
	}
	if o.Timeout > 0 {
		opts = append(opts, managed.WithTimeout(o.Timeout))
	}
	if o.Features != nil && o.Features.Enabled(feature.EnableBetaManagementPolicies) {
		opts = append(opts, managed.WithManagementPolicies())
	}
	if o.MetricOptions != nil && o.MetricOptions.MRMetrics != nil {
		opts = append(opts, managed.WithMetricRecorder(o.MetricOptions.MRMetrics))
	}
	watched := func() bool { return false }
	w, watches := c.(watching)
	if watches {
		watched = w.Changes().Watched
	}
	opts = append(opts, managed.WithPollIntervalHook(pollHook(o, watched)))
	r := managed.NewReconciler(mgr, resource.ManagedKind(gvk), opts...)
	s := mgr.GetScheme()
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	if !s.Recognizes(listGVK) {
		return errors.Errorf(errFmtNoList, listGVK)
	}
	// Without the index every changed Secret listed (and copied) every
	// resource of its namespace: the connection Secrets the provider
	// writes are Secrets too, so N new proxies cost N² copies.
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), obj, indexCredentialsRef, credentialsIndex(credentialsRef)); err != nil {
		return errors.Wrap(err, errIndexCredentials)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(o.ForControllerRuntime()).
		// The runtime's own filter, as provider-kubernetes uses it: a
		// change of spec, labels or annotations is a reconcile; the
		// reconciler's status writes and create annotations are not (it
		// requeues after those by itself).
		For(obj, builder.WithPredicates(resource.DesiredStateChanged())).
		// A rotated password must be in force in seconds, not at the
		// next poll (--poll-watched is minutes): a changed credentials
		// Secret reconciles the resources of its namespace that use it.
		// Secrets are in the manager's cache already (CredentialStore).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(usersOf(mgr.GetClient(), s, listGVK)),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc:  func(ctrlevent.TypedCreateEvent[client.Object]) bool { return false },
				DeleteFunc:  func(ctrlevent.TypedDeleteEvent[client.Object]) bool { return false },
				GenericFunc: func(ctrlevent.TypedGenericEvent[client.Object]) bool { return false },
				UpdateFunc: func(e ctrlevent.TypedUpdateEvent[client.Object]) bool {
					o, ok1 := e.ObjectOld.(*corev1.Secret)
					n, ok2 := e.ObjectNew.(*corev1.Secret)
					return ok1 && ok2 && !reflect.DeepEqual(o.Data, n.Data)
				},
			}))
	if watches {
		// A backend that watches its instances has a changed one
		// reconciled at once; the poll only backs the watch up.
		w.Changes().resolveWith(mgr.GetClient(),
			func() client.Object { return obj.DeepCopyObject().(client.Object) }, //nolint:forcetypeassert // A copy of a client.Object.
			func() client.ObjectList {
				l, _ := s.New(listGVK)
				return l.(client.ObjectList) //nolint:forcetypeassert // The scheme recognizes it.
			})
		b = b.WatchesRawSource(w.Changes().Source())
	}
	return b.Complete(ratelimiter.NewReconciler(name, r, o.GlobalRateLimiter))
}

// credentialsIndex is the indexCredentialsRef value of a managed resource.
func credentialsIndex[M resource.ModernManaged](credentialsRef func(M) string) client.IndexerFunc {
	return func(o client.Object) []string {
		m, ok := o.(M)
		if !ok {
			return nil
		}
		if n := credentialsRef(m); n != "" {
			return []string{n}
		}
		return nil
	}
}

// usersOf maps a Secret to the resources of its namespace whose
// credentials it holds (indexCredentialsRef).
func usersOf(kube client.Reader, s *runtime.Scheme, listGVK schema.GroupVersionKind) handler.MapFunc {
	return func(ctx context.Context, sec client.Object) []reconcile.Request {
		o, err := s.New(listGVK)
		l, ok := o.(client.ObjectList)
		// Only names are read: no copies.
		if err != nil || !ok || kube.List(ctx, l, client.InNamespace(sec.GetNamespace()), client.MatchingFields{indexCredentialsRef: sec.GetName()}, client.UnsafeDisableDeepCopy) != nil {
			return nil
		}
		var out []reconcile.Request
		_ = apimeta.EachListItem(l, func(o runtime.Object) error {
			if m, ok := o.(client.Object); ok {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}})
			}
			return nil
		})
		return out
	}
}
