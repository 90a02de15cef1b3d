/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

// Defaults of KVMProxyParameters, as the API server defaults them (the
// +kubebuilder:default markers), for code that reads parameters no API
// server defaulted: the backend, and the policy rules the composition
// function applies to what it is about to compose.
const (
	DefaultPool       = "default"
	DefaultDiskGiB    = 10
	DefaultMemoryMiB  = 512
	DefaultVCPUs      = 1
	DefaultNetwork    = "default"
	DefaultDomainType = "kvm"
)

// WithDefaults returns p with every field the API server defaults set.
func (p KVMProxyParameters) WithDefaults() KVMProxyParameters {
	if p.Pool == "" {
		p.Pool = DefaultPool
	}
	if p.DiskGiB == 0 {
		p.DiskGiB = DefaultDiskGiB
	}
	if p.MemoryMiB == 0 {
		p.MemoryMiB = DefaultMemoryMiB
	}
	if p.VCPUs == 0 {
		p.VCPUs = DefaultVCPUs
	}
	if p.Network == nil || (p.Network.Name == nil && p.Network.Bridge == nil) {
		name := DefaultNetwork
		p.Network = &KVMNetwork{Name: &name}
	}
	if p.DomainType == "" {
		p.DomainType = DefaultDomainType
	}
	return p
}
