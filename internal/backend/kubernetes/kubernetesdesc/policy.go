/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetesdesc

import (
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/policy"
)

// violations is the backend's policy check (backend.Description.Policy):
// a kubernetes config's allowedNamespaces, allowedImages and
// spec.policy.kubernetes, for a managed resource in namespace; the first
// rule it breaks.
func violations(cfg, forProvider any, namespace string) ([]string, error) {
	var k policy.Kubernetes
	switch c := cfg.(type) {
	case *v1alpha1.ClusterProviderConfig:
		k = policy.KubernetesOf(c.Spec, v1alpha1.ClusterProviderConfigKind+" "+c.GetName())
	case *v1alpha1.ProviderConfig:
		k = policy.KubernetesOf(c.Spec, v1alpha1.ProviderConfigKind+" "+c.GetNamespace()+"/"+c.GetName())
	default:
		return nil, policy.Mismatch(cfg, forProvider)
	}
	p, err := policy.ParamsOf[v1alpha1.KubernetesProxyParameters](cfg, forProvider)
	if err != nil {
		return nil, err
	}
	if m := k.Violation(p, namespace); m != "" {
		return []string{m}, nil
	}
	return nil, nil
}
