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
	"github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/policy"
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
	errFmtInstanceVol  = "spec.forProvider.baseImageVolume %q is a volume of a proxy instance: a proxy never boots a copy of another proxy's disk, whatever %s spec.policy.kvm allows"
	errFmtOverlayBase  = "spec.forProvider.baseImageVolume %q is an overlay of %s (it has a backing store): a proxy boots only a base image, never a copy of another VM's disk, whatever %s spec.policy.kvm allows"
	errFmtDiskOfDomain = "spec.forProvider.baseImageVolume %q is a disk of domain %s: a proxy never boots a copy of another VM's disk, whatever %s spec.policy.kvm allows"
)

// rules is the policy as package policy, the one implementation of its
// rules, reads it.
func (pol Policy) rules() policy.KVM { return policy.KVM{Config: pol.Config, Rules: pol.KVM} }

// check returns every rule p breaks, as one Permanent error naming each
// field and rule, or nil: the policy's rules (package policy, which the
// provider's connector applies before any call, and the composition
// function before it composes) and the rule that holds whatever the policy
// says, that no proxy boots another proxy's volume. It reads nothing but p.
// The rules that need the host (checkBaseImage) run in Create.
func (pol Policy) check(p v1alpha1.KVMProxyParameters) error {
	msgs := pol.rules().Violations(p)
	if p.BaseImageVolume != "" && isInstanceVolume(p.BaseImageVolume) {
		msgs = append(msgs, fmt.Sprintf(errFmtInstanceVol, p.BaseImageVolume, pol.config()))
	}
	if len(msgs) == 0 {
		return nil
	}
	return backend.Permanent(errors.New(strings.Join(msgs, "; ")))
}

func (pol Policy) allowsUserData() bool { return pol.rules().AllowsUserData() }

// config names the provider config in messages.
func (pol Policy) config() string {
	if pol.Config == "" {
		return defaultConfigName
	}
	return pol.Config
}

// defaultConfigName names the provider config in messages when the
// backend was not told its name.
const defaultConfigName = "the provider config"

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
