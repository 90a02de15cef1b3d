/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"strings"
	"testing"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	"libvirt.org/go/libvirtxml"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

const lab = `ClusterProviderConfig "lab"`

// ok are parameters the default policy allows: the shipped example's.
func ok(mods ...func(*v1alpha1.KVMProxyParameters)) v1alpha1.KVMProxyParameters {
	p := v1alpha1.KVMProxyParameters{
		Pool:            DefaultPool,
		BaseImageVolume: "debian-12-genericcloud-amd64.qcow2",
		DiskGiB:         10,
		MemoryMiB:       1024,
		VCPUs:           1,
		Network:         &v1alpha1.KVMNetwork{Name: ptr.To(DefaultNetwork)},
		DomainType:      "kvm",
	}
	for _, m := range mods {
		m(&p)
	}
	return p
}

func TestPolicyCheck(t *testing.T) {
	userData := func(p *v1alpha1.KVMProxyParameters) {
		p.UserDataSecretRef = &commonv1alpha1.LocalSecretKeySelector{Name: "ud", Key: "user-data"}
	}
	bridge := func(br string) func(*v1alpha1.KVMProxyParameters) {
		return func(p *v1alpha1.KVMProxyParameters) { p.Network = &v1alpha1.KVMNetwork{Bridge: ptr.To(br)} }
	}
	cases := map[string]struct {
		reason string
		policy *v1alpha1.KVMPolicy
		params v1alpha1.KVMProxyParameters
		want   string
	}{
		"DefaultsAllowTheExample": {
			reason: "A config without a policy allows the shipped example.",
			params: ok(),
		},
		"DefaultsAllowUnsetFields": {
			reason: "What the API defaults is what the policy's defaults allow.",
			params: v1alpha1.KVMProxyParameters{BaseImageVolume: "base.qcow2"},
		},
		"DefaultPool": {
			reason: "Without a list, only the provider's default pool.",
			params: ok(func(p *v1alpha1.KVMProxyParameters) { p.Pool = "platform-vms" }),
			want:   `spec.forProvider.pool "platform-vms" is not in ClusterProviderConfig "lab" spec.policy.kvm.pools (unset: only "default")`,
		},
		"ListedPool": {
			reason: "A listed pool is allowed, and the default one no longer is.",
			policy: &v1alpha1.KVMPolicy{Pools: []string{"proxies"}},
			params: ok(),
			want:   `spec.forProvider.pool "default" is not in ClusterProviderConfig "lab" spec.policy.kvm.pools`,
		},
		"DefaultNoBridge": {
			reason: "Without a list, no bridge: a bridge puts the VM on the host's own segment.",
			params: ok(bridge("br-mgmt")),
			want:   `spec.forProvider.network.bridge "br-mgmt" is not in ClusterProviderConfig "lab" spec.policy.kvm.bridges (unset: no bridge)`,
		},
		"ForeignBridge": {
			reason: "Only listed bridges.",
			policy: &v1alpha1.KVMPolicy{Bridges: []string{"br-proxies"}},
			params: ok(bridge("br-mgmt")),
			want:   `spec.forProvider.network.bridge "br-mgmt" is not in ClusterProviderConfig "lab" spec.policy.kvm.bridges`,
		},
		"ListedBridge": {
			reason: "A listed bridge is allowed.",
			policy: &v1alpha1.KVMPolicy{Bridges: []string{"br-proxies"}},
			params: ok(bridge("br-proxies")),
		},
		"DefaultNetwork": {
			reason: "Without a list, only the default network.",
			params: ok(func(p *v1alpha1.KVMProxyParameters) { p.Network.Name = ptr.To("mgmt") }),
			want:   `spec.forProvider.network.name "mgmt" is not in ClusterProviderConfig "lab" spec.policy.kvm.networks (unset: only "default")`,
		},
		"NoNetworkAtAll": {
			reason: "An empty list allows nothing, unlike an unset one.",
			policy: &v1alpha1.KVMPolicy{Networks: []string{}, Bridges: []string{"br-proxies"}},
			params: ok(),
			want:   `spec.forProvider.network.name "default" is not in ClusterProviderConfig "lab" spec.policy.kvm.networks`,
		},
		"BaseImageNotListed": {
			reason: "Only listed base images, when the policy lists them.",
			policy: &v1alpha1.KVMPolicy{BaseImageVolumes: []string{"debian-12-egressproxy.qcow2"}},
			params: ok(),
			want:   `spec.forProvider.baseImageVolume "debian-12-genericcloud-amd64.qcow2" is not in ClusterProviderConfig "lab" spec.policy.kvm.baseImageVolumes`,
		},
		"BaseImageIsAProxysDisk": {
			reason: "Another proxy's overlay is refused by its name, even when listed.",
			policy: &v1alpha1.KVMPolicy{BaseImageVolumes: []string{"egp-team-b-db-1a2b3c4d.qcow2"}},
			params: ok(func(p *v1alpha1.KVMProxyParameters) { p.BaseImageVolume = "egp-team-b-db-1a2b3c4d.qcow2" }),
			want:   `spec.forProvider.baseImageVolume "egp-team-b-db-1a2b3c4d.qcow2" is a volume of a proxy instance: a proxy never boots a copy of another proxy's disk, whatever ClusterProviderConfig "lab" spec.policy.kvm allows`,
		},
		"BaseImageIsAProxysSeed": {
			reason: "Another proxy's seed (its htpasswd) is refused by its name.",
			params: ok(func(p *v1alpha1.KVMProxyParameters) { p.BaseImageVolume = "egp-team-b-db-1a2b3c4d-seed.iso" }),
			want:   `spec.forProvider.baseImageVolume "egp-team-b-db-1a2b3c4d-seed.iso" is a volume of a proxy instance: a proxy never boots a copy of another proxy's disk, whatever ClusterProviderConfig "lab" spec.policy.kvm allows`,
		},
		"VCPUsAboveDefault": {
			reason: "Without a ceiling, 4 vCPUs.",
			params: ok(func(p *v1alpha1.KVMProxyParameters) { p.VCPUs = 64 }),
			want:   `spec.forProvider.vcpus 64 is more than ClusterProviderConfig "lab" spec.policy.kvm.maxVCPUs (4, the default)`,
		},
		"MemoryAboveCeiling": {
			reason: "A set ceiling holds.",
			policy: &v1alpha1.KVMPolicy{MaxMemoryMiB: ptr.To[int32](768)},
			params: ok(),
			want:   `spec.forProvider.memoryMiB 1024 is more than ClusterProviderConfig "lab" spec.policy.kvm.maxMemoryMiB (768)`,
		},
		"MemoryAboveDefault": {
			reason: "Without a ceiling, 4096 MiB.",
			params: ok(func(p *v1alpha1.KVMProxyParameters) { p.MemoryMiB = 65536 }),
			want:   `spec.forProvider.memoryMiB 65536 is more than ClusterProviderConfig "lab" spec.policy.kvm.maxMemoryMiB (4096, the default)`,
		},
		"DiskAboveDefault": {
			reason: "Without a ceiling, 20 GiB.",
			params: ok(func(p *v1alpha1.KVMProxyParameters) { p.DiskGiB = 2048 }),
			want:   `spec.forProvider.diskGiB 2048 is more than ClusterProviderConfig "lab" spec.policy.kvm.maxDiskGiB (20, the default)`,
		},
		"RaisedCeilings": {
			reason: "A policy may allow more.",
			policy: &v1alpha1.KVMPolicy{MaxVCPUs: ptr.To[int32](16), MaxMemoryMiB: ptr.To[int32](16384), MaxDiskGiB: ptr.To[int32](100)},
			params: ok(func(p *v1alpha1.KVMProxyParameters) { p.VCPUs, p.MemoryMiB, p.DiskGiB = 16, 16384, 100 }),
		},
		"UserDataByDefault": {
			reason: "A team's own cloud-init is refused unless the policy allows it.",
			params: ok(userData),
			want:   `spec.forProvider.userDataSecretRef is set but ClusterProviderConfig "lab" spec.policy.kvm.allowUserData is not true: a team's own cloud-init runs as root in a VM on the platform's host`,
		},
		"UserDataAllowed": {
			reason: "allowUserData lets it through.",
			policy: &v1alpha1.KVMPolicy{AllowUserData: true},
			params: ok(userData),
		},
		"EveryViolation": {
			reason: "Every rule broken is named at once.",
			params: ok(bridge("br-mgmt"), userData, func(p *v1alpha1.KVMProxyParameters) { p.VCPUs = 8 }),
			want: `spec.forProvider.network.bridge "br-mgmt" is not in ClusterProviderConfig "lab" spec.policy.kvm.bridges (unset: no bridge); ` +
				`spec.forProvider.vcpus 8 is more than ClusterProviderConfig "lab" spec.policy.kvm.maxVCPUs (4, the default); ` +
				`spec.forProvider.userDataSecretRef is set but ClusterProviderConfig "lab" spec.policy.kvm.allowUserData is not true: a team's own cloud-init runs as root in a VM on the platform's host`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := Policy{Config: lab, KVM: tc.policy}.check(tc.params)
			got := ""
			if err != nil {
				got = err.Error()
				if c := backend.ClassOf(err); c != backend.ClassPermanent {
					t.Errorf("%s\nclass: want Permanent, got %s", tc.reason, c)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ncheck(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestCreateRefusedByPolicy: what the policy refuses is refused by Create
// before anything is made, and by Update before anything is changed.
func TestCreateRefusedByPolicy(t *testing.T) {
	d := desired(withPool(DefaultPool))
	disk := func(name, path string) *libvirtxml.Domain {
		x := nicDomain(name, "52:54:00:aa:bb:cc")
		x.Devices.Disks = []libvirtxml.DomainDisk{{Device: "disk", Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: path}}}}
		return x
	}
	withDefaultPool := func(f *fake) {
		f.pools[DefaultPool] = map[string]*libvirtxml.StorageVolume{}
		f.addVolume(DefaultPool, &libvirtxml.StorageVolume{Name: testBase, Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: 1 << 30}})
		f.addVolume(DefaultPool, &libvirtxml.StorageVolume{Name: "db.qcow2", Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: 1 << 30}})
		f.addVolume(DefaultPool, &libvirtxml.StorageVolume{Name: "clone.qcow2", Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: 1 << 30},
			BackingStore: &libvirtxml.StorageVolumeBackingStore{Path: "/" + DefaultPool + "/db.qcow2"}})
	}
	cases := map[string]struct {
		reason string
		fake   []fakeModifier
		d      Desired
		want   string
	}{
		"Allowed": {
			reason: "The default policy allows the fixture in the default pool.",
			fake:   []fakeModifier{withDefaultPool},
			d:      d,
		},
		"UserData": {
			reason: "A team's own user data is refused by default.",
			fake:   []fakeModifier{withDefaultPool},
			d: desired(withPool(DefaultPool), func(d *Desired) {
				d.Params.UserDataSecretRef = &commonv1alpha1.LocalSecretKeySelector{Name: "ud", Key: "user-data"}
			}),
			want: "spec.forProvider.userDataSecretRef is set but",
		},
		"ForeignBridge": {
			reason: "A bridge the policy does not list is refused.",
			fake:   []fakeModifier{withDefaultPool},
			d:      desired(withPool(DefaultPool), withBridge("br-mgmt")),
			want:   `spec.forProvider.network.bridge "br-mgmt" is not in`,
		},
		"AnotherVMsDisk": {
			reason: "A volume another domain runs on is never a base image, whatever the policy lists.",
			fake:   []fakeModifier{withDefaultPool, withDomain(disk("platform-db", "/"+DefaultPool+"/db.qcow2"), golibvirt.DomainRunning, 1)},
			d:      desired(withPool(DefaultPool), func(d *Desired) { d.Params.BaseImageVolume = "db.qcow2" }),
			want:   `spec.forProvider.baseImageVolume "db.qcow2" is a disk of domain platform-db`,
		},
		"AStoppedVMsDisk": {
			reason: "A domain that is shut off still owns its disk.",
			fake:   []fakeModifier{withDefaultPool, withDomain(disk("platform-db", "/"+DefaultPool+"/db.qcow2"), golibvirt.DomainShutoff, 1)},
			d:      desired(withPool(DefaultPool), func(d *Desired) { d.Params.BaseImageVolume = "db.qcow2" }),
			want:   `spec.forProvider.baseImageVolume "db.qcow2" is a disk of domain platform-db`,
		},
		"AnOverlay": {
			reason: "An overlay (a copy of another VM's disk) is never a base image.",
			fake:   []fakeModifier{withDefaultPool},
			d:      desired(withPool(DefaultPool), func(d *Desired) { d.Params.BaseImageVolume = "clone.qcow2" }),
			want:   `spec.forProvider.baseImageVolume "clone.qcow2" is an overlay of /default/db.qcow2`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFake(tc.fake...)
			before := stateOf(f)
			b := newBackend(f, nil, WithPolicy(Policy{Config: lab}))
			err := b.Create(context.Background(), tc.d)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("%s\nCreate: %v", tc.reason, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || backend.ClassOf(err) != backend.ClassPermanent {
				t.Errorf("%s\nCreate: want a Permanent error with %q, got %v", tc.reason, tc.want, err)
			}
			if diff := cmp.Diff(before, stateOf(f)); diff != "" {
				t.Errorf("%s\nCreate changed something: -before, +after:\n%s", tc.reason, diff)
			}
			if _, ok := f.domains[tc.d.Name]; ok {
				t.Errorf("%s\nCreate defined the domain", tc.reason)
			}
			for n := range f.pools[DefaultPool] {
				if strings.HasPrefix(n, tc.d.Name) {
					t.Errorf("%s\nCreate made volume %s", tc.reason, n)
				}
			}
		})
	}
}

// TestObservePolicyViolation: a running proxy the policy now refuses (the
// platform tightened it) is still found by Observe, which leaves the policy
// to the connector (it refuses the resource before any backend call), so
// it can be deleted; Update refuses and leaves it running.
func TestObservePolicyViolation(t *testing.T) {
	d := desired(withMemory(2048))
	f := newFake(append(healthyVolumes(d), withDomain(ourDomain(t, d), golibvirt.DomainRunning, 1))...)
	b := newBackend(f, nil, WithPolicy(Policy{Config: lab, KVM: &v1alpha1.KVMPolicy{Pools: []string{testPool}, MaxMemoryMiB: ptr.To[int32](1024)}}))
	const rule = `spec.forProvider.memoryMiB 2048 is more than ClusterProviderConfig "lab" spec.policy.kvm.maxMemoryMiB (1024)`
	o, err := b.Observe(context.Background(), d)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	if strings.Contains(o.Diff, rule) || o.State != commonv1alpha1.StateRunning {
		t.Errorf("Observe: want running, the policy left to the connector, got %+v", o)
	}
	err = b.Update(context.Background(), d)
	if err == nil || err.Error() != rule || backend.ClassOf(err) != backend.ClassPermanent {
		t.Errorf("Update: want Permanent %q, got %v", rule, err)
	}
	if dom, ok := f.domains[d.Name]; !ok || dom.state.State != golibvirt.DomainRunning {
		t.Errorf("Update must leave the proxy running")
	}
	if err := b.Delete(context.Background(), deleteOnly(d)); err != nil {
		t.Errorf("Delete: %v", err)
	}
}

// TestObserveRefusedUserDataIsNotRead: Observe never reads user data the
// policy refuses to run.
func TestObserveRefusedUserDataIsNotRead(t *testing.T) {
	d := desired(func(d *Desired) {
		d.Params.UserDataSecretRef = &commonv1alpha1.LocalSecretKeySelector{Name: "ud", Key: "user-data"}
	})
	f := newFake(append(healthyVolumes(d), withDomain(ourDomain(t, d), golibvirt.DomainRunning, 1))...)
	read := false
	b := newBackend(f, nil, WithPolicy(Policy{Config: lab, KVM: &v1alpha1.KVMPolicy{Pools: []string{testPool}}}),
		WithUserDataSource(func(context.Context, string, commonv1alpha1.LocalSecretKeySelector) ([]byte, error) {
			read = true
			return []byte("#cloud-config\n"), nil
		}))
	o, err := b.Observe(context.Background(), d)
	if err != nil || read {
		t.Errorf("Observe: want the instance without reading the user data; got %+v, %v, read %t", o, err, read)
	}
}
