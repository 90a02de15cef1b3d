/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/controller/kubernetesproxy"
)

func TestKindOf(t *testing.T) {
	k := kubernetesproxy.Controller.Kind
	mg := &v1alpha1.KubernetesProxy{Spec: v1alpha1.KubernetesProxySpec{ForProvider: v1alpha1.KubernetesProxyParameters{
		Namespace:       "egress",
		ProxyParameters: commonv1alpha1.ProxyParameters{Port: 8080},
	}}}
	k.SetObservation(mg, backend.Observation[v1alpha1.KubernetesProxyObservation]{
		ID: "id", Endpoint: "10.0.0.1:8080", EgressIPs: []string{"203.0.113.7"}, State: commonv1alpha1.StateRunning,
		Extra: v1alpha1.KubernetesProxyObservation{AvailableReplicas: 2},
	})
	type got struct {
		Params      v1alpha1.KubernetesProxyParameters
		Proxy       commonv1alpha1.ProxyParameters
		Observation v1alpha1.KubernetesProxyObservation
	}
	want := got{
		Params: mg.Spec.ForProvider,
		Proxy:  commonv1alpha1.ProxyParameters{Port: 8080},
		// Both the backend's own fields and those every kind reports.
		Observation: v1alpha1.KubernetesProxyObservation{AvailableReplicas: 2, ProxyObservation: commonv1alpha1.ProxyObservation{
			InstanceID: "id", Endpoint: "10.0.0.1:8080", EgressIPs: []string{"203.0.113.7"}, State: commonv1alpha1.StateRunning,
		}},
	}
	if diff := cmp.Diff(want, got{Params: k.Params(mg), Proxy: k.Proxy(mg), Observation: mg.Status.AtProvider}); diff != "" {
		t.Errorf("KindOf: -want, +got:\n%s", diff)
	}
}
