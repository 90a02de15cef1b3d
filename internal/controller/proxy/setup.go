/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// Options configure every proxy controller.
type Options struct {
	controller.Options

	// ProviderInstance names this provider deployment in the ownership
	// labels, so deployments sharing a backend never touch each other's
	// instances.
	ProviderInstance string

	// Instrumentation counts, times and traces every backend call.
	Instrumentation *backend.Instrumentation

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
}

// Setup registers the managed reconciler of one proxy kind, served by c.
func Setup[M resource.ModernManaged](mgr ctrl.Manager, o Options, gvk schema.GroupVersionKind, obj M, c managed.TypedExternalConnector[M], maxNameLen int) error {
	name := managed.ControllerName(gvk.GroupKind().String())
	opts := []managed.ReconcilerOption{
		managed.WithTypedExternalConnector[M](c),
		managed.WithLogger(o.Logger.WithValues("controller", name)),
		managed.WithPollInterval(o.PollInterval),
		managed.WithRecorder(event.NewAPIRecorder(mgr.GetEventRecorderFor(name))),
		managed.WithInitializers(NameInitializer(mgr.GetClient(), maxNameLen)),
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
	r := managed.NewReconciler(mgr, resource.ManagedKind(gvk), opts...)
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(o.ForControllerRuntime()).
		WithEventFilter(resource.DesiredStateChanged()).
		For(obj).
		Complete(ratelimiter.NewReconciler(name, r, o.GlobalRateLimiter))
}
