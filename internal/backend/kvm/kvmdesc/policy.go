/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvmdesc

import (
	"fmt"

	"github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/policy"
)

// violations is the backend's policy check (backend.Description.Policy):
// spec.policy.kvm of a kvm config, every field it refuses named.
func violations(cfg, forProvider any, _ string) ([]string, error) {
	var k policy.KVM
	switch c := cfg.(type) {
	case *v1alpha1.ClusterProviderConfig:
		k = policy.KVM{Config: fmt.Sprintf("%s %q", v1alpha1.ClusterProviderConfigKind, c.GetName()), Rules: c.Spec.Policy.KVM}
	case *v1alpha1.ProviderConfig:
		k = policy.KVM{Config: fmt.Sprintf("%s %q", v1alpha1.ProviderConfigKind, c.GetName()), Rules: c.Spec.Policy.KVM}
	default:
		return nil, policy.Mismatch(cfg, forProvider)
	}
	p, err := policy.ParamsOf[v1alpha1.KVMProxyParameters](cfg, forProvider)
	if err != nil {
		return nil, err
	}
	return k.Violations(p), nil
}
