/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package kubernetesproxy wires the KubernetesProxy managed resource to the kubernetes backend.
package kubernetesproxy

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
)

// BackendName names the backend in messages and metrics.
const BackendName = "kubernetes"

const (
	errFmtConfigType = "unexpected provider config type %T"
	errAddCollector  = "cannot add the garbage collector"
	errAddHealth     = "cannot add the health reporter"
)

// Backend is the kubernetes backend as the controller sees it.
type Backend = backend.Backend[v1alpha1.KubernetesProxyParameters, v1alpha1.KubernetesProxyObservation]

// BackendFactory builds the backend for a provider config's spec.
type BackendFactory = proxy.BackendFactory[v1alpha1.KubernetesProxyParameters, v1alpha1.KubernetesProxyObservation]

// kind adapts KubernetesProxy to the shared proxy reconciler.
type kind struct{}

func (kind) Proxy(mg *v1alpha1.KubernetesProxy) commonv1alpha1.ProxyParameters {
	return mg.Spec.ForProvider.ProxyParameters
}

func (kind) Params(mg *v1alpha1.KubernetesProxy) v1alpha1.KubernetesProxyParameters {
	return mg.Spec.ForProvider
}

func (kind) SetObservation(mg *v1alpha1.KubernetesProxy, o backend.Observation[v1alpha1.KubernetesProxyObservation]) {
	mg.Status.AtProvider = o.Extra
	mg.Status.AtProvider.ProxyObservation = proxy.CommonObservation(o)
}

func (kind) MaxNameLength() int { return backend.MaxNameKubernetes }

// ConfigSpec returns the spec of a resolved ProviderConfig or
// ClusterProviderConfig of the group.
func ConfigSpec(cfg proxy.Config) (v1alpha1.ProviderConfigSpec, error) {
	switch pc := cfg.Object.(type) {
	case *v1alpha1.ProviderConfig:
		return pc.Spec, nil
	case *v1alpha1.ClusterProviderConfig:
		return pc.Spec, nil
	}
	return v1alpha1.ProviderConfigSpec{}, errors.Errorf(errFmtConfigType, cfg.Object)
}

// Setup adds the KubernetesProxy controller to mgr. A nil factory registers the
// controller anyway, so resources report that the backend is missing instead
// of being ignored.
func Setup(mgr ctrl.Manager, o proxy.Options, f BackendFactory) error {
	c := proxy.NewConnector(proxy.ConnectorConfig[*v1alpha1.KubernetesProxy, v1alpha1.KubernetesProxyParameters, v1alpha1.KubernetesProxyObservation]{
		Kube:    mgr.GetClient(),
		Usage:   &v1alpha1.ProviderConfigUsage{},
		Kind:    kind{},
		Backend: BackendName,
		NewConfigs: func() (client.Object, client.Object) {
			return &v1alpha1.ProviderConfig{}, &v1alpha1.ClusterProviderConfig{}
		},
		NewBackend: f,
	}, o)
	if f == nil {
		return proxy.Setup(mgr, o, v1alpha1.KubernetesProxyGroupVersionKind, &v1alpha1.KubernetesProxy{}, c, backend.MaxNameKubernetes)
	}
	bg := proxy.CollectorConfig[v1alpha1.KubernetesProxyParameters, v1alpha1.KubernetesProxyObservation]{
		Backend:    BackendName,
		Kube:       mgr.GetClient(),
		NewBackend: f,
		NewOwners:  func() client.ObjectList { return &v1alpha1.KubernetesProxyList{} },
		NewConfigs: func() (client.ObjectList, client.ObjectList) {
			return &v1alpha1.ProviderConfigList{}, &v1alpha1.ClusterProviderConfigList{}
		},
	}
	if o.GCInterval > 0 {
		if err := mgr.Add(proxy.NewCollector(bg, o)); err != nil {
			return errors.Wrap(err, errAddCollector)
		}
	}
	if o.HealthInterval > 0 {
		if err := mgr.Add(proxy.NewHealthReporter(bg, BackendName, o)); err != nil {
			return errors.Wrap(err, errAddHealth)
		}
	}
	return proxy.Setup(mgr, o, v1alpha1.KubernetesProxyGroupVersionKind, &v1alpha1.KubernetesProxy{}, c, backend.MaxNameKubernetes)
}
