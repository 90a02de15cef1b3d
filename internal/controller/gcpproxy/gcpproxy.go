/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package gcpproxy is the controller side of the gcp backend: Controller,
// from which package proxy builds the controllers, and the factory that
// builds the backend from a provider config.
package gcpproxy

import (
	"github.com/alecthomas/kingpin/v2"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/gcp/gcpdesc"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
)

type (
	// Backend is the gcp backend as the controller sees it.
	Backend = backend.Backend[v1alpha1.GCPProxyParameters, v1alpha1.GCPProxyObservation]
	// BackendFactory builds the backend for a provider config.
	BackendFactory = proxy.BackendFactory[v1alpha1.GCPProxyParameters, v1alpha1.GCPProxyObservation]
)

// Controller is the controller side of the gcp backend.
var Controller = proxy.Controller[*v1alpha1.GCPProxy, v1alpha1.GCPProxyParameters, v1alpha1.GCPProxyObservation]{
	Backend: gcpdesc.Backend,
	Kind: proxy.KindOf(
		func(mg *v1alpha1.GCPProxy) v1alpha1.GCPProxyParameters { return mg.Spec.ForProvider },
		func(p v1alpha1.GCPProxyParameters) commonv1alpha1.ProxyParameters { return p.ProxyParameters },
		func(mg *v1alpha1.GCPProxy, o v1alpha1.GCPProxyObservation, c commonv1alpha1.ProxyObservation) {
			o.ProxyObservation = c
			mg.Status.AtProvider = o
		},
		gcpdesc.Backend.MaxNameLength),
	Factory: func(*kingpin.Application) func(proxy.Env) BackendFactory {
		return func(env proxy.Env) BackendFactory {
			return NewFactory(WithCallTimeout(env.CallTimeout), WithDeletions(env.Deletions))
		}
	},
}
