/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcpdesc

import (
	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/policy"
)

// violations is the backend's policy check (backend.Description.Policy):
// spec.policy.gcp of a gcp config with its allowedServiceAccounts, every
// field it refuses named.
func violations(cfg, forProvider any, _ string) ([]string, error) {
	var g policy.GCP
	switch c := cfg.(type) {
	case *v1alpha1.ClusterProviderConfig:
		g = policy.GCPOf(c.Spec, v1alpha1.ClusterProviderConfigKind+" "+c.GetName())
	case *v1alpha1.ProviderConfig:
		g = policy.GCPOf(c.Spec, v1alpha1.ProviderConfigKind+" "+c.GetNamespace()+"/"+c.GetName())
	default:
		return nil, policy.Mismatch(cfg, forProvider)
	}
	p, err := policy.ParamsOf[v1alpha1.GCPProxyParameters](cfg, forProvider)
	if err != nil {
		return nil, err
	}
	return g.Violations(p), nil
}
