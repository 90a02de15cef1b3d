/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package policy

import (
	"fmt"
	"slices"

	"k8s.io/utils/ptr"

	kvmv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
)

const (
	errFmtKVMNotIn    = "spec.forProvider.%s %q is not in %s spec.policy.kvm.%s%s"
	errFmtKVMAbove    = "spec.forProvider.%s %d is more than %s spec.policy.kvm.%s (%d%s)"
	errFmtKVMUserData = "spec.forProvider.userDataSecretRef is set but %s spec.policy.kvm.allowUserData is not true: a team's own cloud-init runs as root in a VM on the platform's host"
	noConfig          = "the provider config"
	unsetDefault      = ", the default"
)

// Defaults of a KVMPolicy's lists when unset.
var (
	defaultKVMPools    = []string{kvmv1alpha1.DefaultPool}
	defaultKVMNetworks = []string{kvmv1alpha1.DefaultNetwork}
)

// KVM is spec.policy.kvm of one provider config.
type KVM struct {
	// Config names the provider config in messages, as Kind "name".
	Config string
	// Rules are the rules; nil has every default (kvmv1alpha1.KVMPolicy).
	Rules *kvmv1alpha1.KVMPolicy
}

// Violations returns one message per rule p, a KVMProxy's
// spec.forProvider, breaks, each naming the field and the rule. It reads
// nothing but p; the rules that need the host (which volumes are disks of
// other domains) are the backend's.
func (k KVM) Violations(p kvmv1alpha1.KVMProxyParameters) []string {
	r := ptr.Deref(k.Rules, kvmv1alpha1.KVMPolicy{})
	p = p.WithDefaults()
	var msgs []string
	notIn := func(field, value, list string, allowed, dflt []string, unset string) {
		if allowed == nil {
			allowed = dflt
		} else {
			unset = ""
		}
		if !slices.Contains(allowed, value) {
			msgs = append(msgs, fmt.Sprintf(errFmtKVMNotIn, field, value, k.config(), list, unset))
		}
	}
	above := func(field, limit string, value int32, max *int32, dflt int32) {
		m, unset := ptr.Deref(max, dflt), ""
		if max == nil {
			unset = unsetDefault
		}
		if value > m {
			msgs = append(msgs, fmt.Sprintf(errFmtKVMAbove, field, value, k.config(), limit, m, unset))
		}
	}
	notIn("pool", p.Pool, "pools", r.Pools, defaultKVMPools, ` (unset: only "`+kvmv1alpha1.DefaultPool+`")`)
	if r.BaseImageVolumes != nil {
		notIn("baseImageVolume", p.BaseImageVolume, "baseImageVolumes", r.BaseImageVolumes, nil, "")
	}
	if p.Network.Bridge != nil {
		notIn("network.bridge", *p.Network.Bridge, "bridges", r.Bridges, nil, " (unset: no bridge)")
	} else {
		notIn("network.name", ptr.Deref(p.Network.Name, ""), "networks", r.Networks, defaultKVMNetworks, ` (unset: only "`+kvmv1alpha1.DefaultNetwork+`")`)
	}
	above("vcpus", "maxVCPUs", p.VCPUs, r.MaxVCPUs, kvmv1alpha1.DefaultPolicyMaxVCPUs)
	above("memoryMiB", "maxMemoryMiB", p.MemoryMiB, r.MaxMemoryMiB, kvmv1alpha1.DefaultPolicyMaxMemoryMiB)
	above("diskGiB", "maxDiskGiB", p.DiskGiB, r.MaxDiskGiB, kvmv1alpha1.DefaultPolicyMaxDiskGiB)
	if p.UserDataSecretRef != nil && !r.AllowUserData {
		msgs = append(msgs, fmt.Sprintf(errFmtKVMUserData, k.config()))
	}
	return msgs
}

// AllowsUserData reports whether the proxies may bring their own user data.
func (k KVM) AllowsUserData() bool { return k.Rules != nil && k.Rules.AllowUserData }

func (k KVM) config() string {
	if k.Config == "" {
		return noConfig
	}
	return k.Config
}
