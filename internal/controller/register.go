/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package controller registers every controller of the provider.
package controller

import (
	"github.com/alecthomas/kingpin/v2"
	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/customresourcesgate"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/controller/config"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
)

const (
	errGate          = "cannot set up the CRD gate"
	errFmtSetup      = "cannot set up the controllers of the %s backend"
	errFmtStateList  = "cannot record the state metrics of %s: the scheme has no managed resource list %s"
	errFmtStateAdded = "cannot add the state metrics recorder of %s"
)

// A Backend is one backend's controllers, ready to be added.
type Backend struct {
	// Description is the backend's entry in registry.Backends.
	Description backend.Description
	// Setup adds the backend's proxy controllers to mgr.
	Setup func(mgr ctrl.Manager, o proxy.Options) error
}

// Wire declares the flags of each registered backend on app, and returns
// what makes their Backends once app has parsed them. cmd/provider calls it
// with its list of registrations; so does the test of a test-only backend.
func Wire(app *kingpin.Application, regs []proxy.Registration) func(env proxy.Env) []Backend {
	setups := make([]func(ctrl.Manager, proxy.Options, proxy.Env) error, len(regs))
	for i, r := range regs {
		setups[i] = r.Flags(app)
	}
	return func(env proxy.Env) []Backend {
		out := make([]Backend, len(regs))
		for i, r := range regs {
			setup := setups[i]
			out[i] = Backend{Description: r.Description(), Setup: func(mgr ctrl.Manager, o proxy.Options) error { return setup(mgr, o, env) }}
		}
		return out
	}
}

// Setup adds the config controllers and the controllers of each backend to
// mgr. With o.Gate set (safe-start), a backend's controllers are added only
// once the CRDs of its managed resource and config kinds are established:
// a platform team that activates only some backends' managed resource
// definitions runs only those backends' controllers.
func Setup(mgr ctrl.Manager, o proxy.Options, backends []Backend) error {
	configs, err := config.NewConfigs(mgr, o.Options)
	if err != nil {
		return err
	}
	if o.Gate != nil {
		if err := customresourcesgate.Setup(mgr, o.Options); err != nil {
			return errors.Wrap(err, errGate)
		}
		openServed(mgr.GetRESTMapper(), o.Gate, backends)
	}
	for _, b := range backends {
		start := func() error {
			if err := configs.Add(b.Description); err != nil {
				return errors.Wrapf(err, errFmtSetup, b.Description.Name)
			}
			if err := addStateRecorder(mgr, o.Options, b.Description.Managed); err != nil {
				return errors.Wrapf(err, errFmtSetup, b.Description.Name)
			}
			return errors.Wrapf(b.Setup(mgr, o), errFmtSetup, b.Description.Name)
		}
		if o.Gate == nil {
			if err := start(); err != nil {
				return err
			}
			continue
		}
		o.Gate.Register(func() {
			if err := start(); err != nil {
				// Nothing returns from a gate's callback: as in
				// provider-kubernetes, the failure is logged.
				mgr.GetLogger().Error(err, "Cannot start the controllers of a backend", "backend", b.Description.Name)
			}
		}, gvks(b.Description)...)
	}
	return nil
}

// addStateRecorder adds crossplane-runtime's recorder of the
// crossplane_managed_resource_{exists,ready,synced} gauges of kind, as
// provider templates do in the setup of each managed resource kind: behind
// the gate, so that it lists only a kind whose CRD is established. A zero
// PollStateMetricInterval turns it off.
func addStateRecorder(mgr ctrl.Manager, o controller.Options, kind schema.GroupVersionKind) error {
	m := o.MetricOptions
	if m == nil || m.MRStateMetrics == nil || m.PollStateMetricInterval <= 0 {
		return nil
	}
	listKind := kind.GroupVersion().WithKind(kind.Kind + "List")
	l, err := mgr.GetScheme().New(listKind)
	if err != nil {
		return errors.Wrapf(err, errFmtStateList, kind, listKind)
	}
	ml, ok := l.(resource.ManagedList)
	if !ok {
		return errors.Errorf(errFmtStateList, kind, listKind)
	}
	return errors.Wrapf(mgr.Add(statemetrics.NewMRStateRecorder(mgr.GetClient(), o.Logger, m.MRStateMetrics, ml, m.PollStateMetricInterval)), errFmtStateAdded, kind)
}

// gvks are the kinds whose CRDs a backend's controllers need.
func gvks(b backend.Description) []schema.GroupVersionKind {
	return []schema.GroupVersionKind{b.Managed, b.ProviderConfig(), b.ClusterProviderConfig()}
}
