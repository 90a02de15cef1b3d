/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package kubernetesproxy is the controller side of the kubernetes backend:
// Controller, from which package proxy builds the controllers, and the
// factory that builds the backend from a provider config.
package kubernetesproxy

import (
	"github.com/alecthomas/kingpin/v2"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kubernetes/kubernetesdesc"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
)

type (
	// Backend is the kubernetes backend as the controller sees it.
	Backend = backend.Backend[v1alpha1.KubernetesProxyParameters, v1alpha1.KubernetesProxyObservation]
	// BackendFactory builds the backend for a provider config.
	BackendFactory = proxy.BackendFactory[v1alpha1.KubernetesProxyParameters, v1alpha1.KubernetesProxyObservation]
)

// Controller is the controller side of the kubernetes backend. The target
// cluster of InjectedIdentity is the provider's own.
var Controller = proxy.Controller[*v1alpha1.KubernetesProxy, v1alpha1.KubernetesProxyParameters, v1alpha1.KubernetesProxyObservation]{
	Backend: kubernetesdesc.Backend,
	Kind: proxy.KindOf(
		func(mg *v1alpha1.KubernetesProxy) v1alpha1.KubernetesProxyParameters { return mg.Spec.ForProvider },
		func(p v1alpha1.KubernetesProxyParameters) commonv1alpha1.ProxyParameters { return p.ProxyParameters },
		func(mg *v1alpha1.KubernetesProxy, o v1alpha1.KubernetesProxyObservation, c commonv1alpha1.ProxyObservation) {
			o.ProxyObservation = c
			mg.Status.AtProvider = o
		},
		kubernetesdesc.Backend.MaxNameLength),
	Factory: func(*kingpin.Application) func(proxy.Env) BackendFactory {
		return func(env proxy.Env) BackendFactory {
			return NewFactory(WithInjectedConfig(env.Self), WithCallTimeout(env.CallTimeout), WithReconcileRate(env.ReconcileRate), WithDeletions(env.Deletions))
		}
	},
}
