/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"fmt"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/utils/ptr"

	"github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// Policy is the platform's policy for the proxies of one provider config.
// A team that writes a KVMProxy itself skips the composition function, so
// the backend checks every proxy against the policy of the config it uses,
// before it makes or changes anything.
type Policy struct {
	// Config names the provider config in messages, as Kind "name".
	Config string
	// KVM are the rules; nil has every default (v1alpha1.KVMPolicy).
	KVM *v1alpha1.KVMPolicy
}

// WithPolicy sets the policy the backend enforces. Without it the defaults
// hold, as for a config without spec.policy.kvm.
func WithPolicy(p Policy) Option {
	return func(b *Backend) { b.policy = p }
}

const (
	errFmtNotIn        = "spec.forProvider.%s %q is not in %s spec.policy.kvm.%s%s"
	errFmtAbove        = "spec.forProvider.%s %d is more than %s spec.policy.kvm.%s (%d%s)"
	errFmtUserData     = "spec.forProvider.userDataSecretRef is set but %s spec.policy.kvm.allowUserData is not true: a team's own cloud-init runs as root in a VM on the platform's host"
	errFmtInstanceVol  = "spec.forProvider.baseImageVolume %q is a volume of a proxy instance: a proxy never boots a copy of another proxy's disk, whatever %s spec.policy.kvm allows"
	errFmtOverlayBase  = "spec.forProvider.baseImageVolume %q is an overlay of %s (it has a backing store): a proxy boots only a base image, never a copy of another VM's disk, whatever %s spec.policy.kvm allows"
	errFmtDiskOfDomain = "spec.forProvider.baseImageVolume %q is a disk of domain %s: a proxy never boots a copy of another VM's disk, whatever %s spec.policy.kvm allows"
	noConfig           = "the provider config"
	unsetDefault       = ", the default"
)

// Defaults of a policy's lists when unset.
var (
	defaultPolicyPools    = []string{DefaultPool}
	defaultPolicyNetworks = []string{DefaultNetwork}
)

// check returns every rule p breaks, as one Permanent error naming each
// field and rule, or nil. It reads nothing but p: Observe runs it on every
// poll. The rules that need the host (checkBaseImage) run in Create.
func (pol Policy) check(p v1alpha1.KVMProxyParameters) error {
	r := ptr.Deref(pol.KVM, v1alpha1.KVMPolicy{})
	p = withDefaults(p)
	var msgs []string
	notIn := func(field, value, list string, allowed, dflt []string, unset string) {
		if allowed == nil {
			allowed = dflt
		} else {
			unset = ""
		}
		if !slices.Contains(allowed, value) {
			msgs = append(msgs, fmt.Sprintf(errFmtNotIn, field, value, pol.config(), list, unset))
		}
	}
	above := func(field, limit string, value int32, max *int32, dflt int32) {
		m, unset := ptr.Deref(max, dflt), ""
		if max == nil {
			unset = unsetDefault
		}
		if value > m {
			msgs = append(msgs, fmt.Sprintf(errFmtAbove, field, value, pol.config(), limit, m, unset))
		}
	}
	notIn("pool", p.Pool, "pools", r.Pools, defaultPolicyPools, ` (unset: only "`+DefaultPool+`")`)
	if r.BaseImageVolumes != nil {
		notIn("baseImageVolume", p.BaseImageVolume, "baseImageVolumes", r.BaseImageVolumes, nil, "")
	}
	if isInstanceVolume(p.BaseImageVolume) {
		msgs = append(msgs, fmt.Sprintf(errFmtInstanceVol, p.BaseImageVolume, pol.config()))
	}
	if p.Network.Bridge != nil {
		notIn("network.bridge", *p.Network.Bridge, "bridges", r.Bridges, nil, " (unset: no bridge)")
	} else {
		notIn("network.name", ptr.Deref(p.Network.Name, ""), "networks", r.Networks, defaultPolicyNetworks, ` (unset: only "`+DefaultNetwork+`")`)
	}
	above("vcpus", "maxVCPUs", p.VCPUs, r.MaxVCPUs, v1alpha1.DefaultPolicyMaxVCPUs)
	above("memoryMiB", "maxMemoryMiB", p.MemoryMiB, r.MaxMemoryMiB, v1alpha1.DefaultPolicyMaxMemoryMiB)
	above("diskGiB", "maxDiskGiB", p.DiskGiB, r.MaxDiskGiB, v1alpha1.DefaultPolicyMaxDiskGiB)
	if p.UserDataSecretRef != nil && !r.AllowUserData {
		msgs = append(msgs, fmt.Sprintf(errFmtUserData, pol.config()))
	}
	if len(msgs) == 0 {
		return nil
	}
	return backend.Permanent(errors.New(strings.Join(msgs, "; ")))
}

func (pol Policy) allowsUserData() bool { return pol.KVM != nil && pol.KVM.AllowUserData }

func (pol Policy) config() string {
	if pol.Config == "" {
		return noConfig
	}
	return pol.Config
}

// isInstanceVolume reports whether name is that of a volume the backend
// makes for an instance (volumesOf of a backend.Name).
func isInstanceVolume(name string) bool {
	if !strings.HasPrefix(name, backend.NamePrefix+"-") {
		return false
	}
	return strings.HasSuffix(name, overlaySuffix) || strings.HasSuffix(name, seedSuffix)
}

// checkBaseImage refuses, whatever the policy, a base image that is an
// overlay or a disk of another domain: the proxy's disk is a copy-on-write
// clone of its base image, so either would boot (and hand the team) a copy
// of another VM's data. disks are the disk sources of the host's other
// domains, by domain name.
func (pol Policy) checkBaseImage(name string, base volume, pool string, disks map[string][]string) error {
	if bs := base.XML.BackingStore; bs != nil {
		return backend.Permanent(errors.Errorf(errFmtOverlayBase, name, bs.Path, pol.config()))
	}
	path, ref := volumePath(base), volumeRef(pool, name)
	doms := make([]string, 0, len(disks))
	for dom := range disks {
		doms = append(doms, dom)
	}
	slices.Sort(doms)
	for _, dom := range doms {
		for _, src := range disks[dom] {
			if (path != "" && src == path) || src == ref {
				return backend.Permanent(errors.Errorf(errFmtDiskOfDomain, name, dom, pol.config()))
			}
		}
	}
	return nil
}

// volumeRef is how devices records a disk given as a pool's volume.
func volumeRef(pool, name string) string { return "volume:" + pool + "/" + name }
