/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

// Policy is the platform's rules for the KVMProxys that use a provider config:
// the provider refuses, on the resource's Synced condition, any that breaks
// them, before anything is created or changed.
type Policy struct {
	commonv1alpha1.ProxyPolicy `json:",inline"`
}

// GetProxyPolicy returns the rules common to every backend.
func (pc *ProviderConfig) GetProxyPolicy() *commonv1alpha1.ProxyPolicy {
	return &pc.Spec.Policy.ProxyPolicy
}

// GetProxyPolicy returns the rules common to every backend.
func (pc *ClusterProviderConfig) GetProxyPolicy() *commonv1alpha1.ProxyPolicy {
	return &pc.Spec.Policy.ProxyPolicy
}
