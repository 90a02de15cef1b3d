/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"syscall"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/go-cmp/cmp"
	"libvirt.org/go/libvirtxml"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

var created = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

type domainModifier func(*domainSpec, *metadata)

// ourDomain is the domain Create would define for d.
func ourDomain(t *testing.T, d Desired, mods ...domainModifier) *libvirtxml.Domain {
	t.Helper()
	p := withDefaults(d.Params)
	conf, err := squid.Render(squidConfig(d))
	if err != nil {
		t.Fatal(err)
	}
	ht, err := squid.Htpasswd(d.Credentials.Username, d.Credentials.Password)
	if err != nil {
		t.Fatal(err)
	}
	m := metadata{Ownership: d.Ownership, CreatedAt: created, Pool: p.Pool, ConfigChecksum: squid.Checksum(conf), Htpasswd: string(ht), Volumes: volumesOf(d.Name), Guest: guestVersion}
	// The fake's volume paths.
	s := domainSpecFor(d, MACAddress(d.Ownership.Owner.UID), []string{bootDisk}, "/"+p.Pool+"/"+overlayName(d.Name), "/"+p.Pool+"/"+seedName(d.Name))
	for _, mod := range mods {
		mod(&s, &m)
	}
	if s.Metadata, err = m.marshal(); err != nil {
		t.Fatal(err)
	}
	return domainXML(s)
}

func withSpecMemory(mib uint) domainModifier {
	return func(s *domainSpec, _ *metadata) { s.MemoryMiB = mib }
}

func withGuestVersion(v string) domainModifier {
	return func(_ *domainSpec, m *metadata) { m.Guest = v }
}

func withMetaInstance(pi string) domainModifier {
	return func(_ *domainSpec, m *metadata) { m.Ownership.ProviderInstance = pi }
}

// withoutClaims is a domain made before Create recorded its volumes.
func withoutClaims() domainModifier {
	return func(_ *domainSpec, m *metadata) { m.Volumes = nil }
}

// withoutDisks is the claim Create defines before it makes the volumes.
func withoutDisks() domainModifier {
	return func(s *domainSpec, _ *metadata) { s.Overlay, s.Seed = "", "" }
}

func withoutMetadata() domainModifier {
	return func(_ *domainSpec, m *metadata) { m.Ownership = backend.Ownership{} }
}

// healthyVolumes are both volumes at the fixture's size.
func healthyVolumes(d Desired) []fakeModifier {
	return []fakeModifier{
		withVolume(testPool, overlayName(d.Name), uint64(d.Params.DiskGiB)*gib),
		withVolume(testPool, seedName(d.Name), 1234),
	}
}

func observation(d Desired, mods ...func(*Observation)) Observation {
	conf, _ := squid.Render(squidConfig(d))
	o := Observation{
		ID:             FormatInstanceID(testPool, d.Name),
		State:          commonv1alpha1.StateRunning,
		Ready:          true,
		Endpoint:       "192.168.150.10:3128",
		EgressIPs:      []string{"192.168.150.10"},
		CreatedAt:      created,
		Ownership:      d.Ownership,
		UpToDate:       true,
		ConfigChecksum: squid.Checksum(conf),
		Extra:          v1alpha1.KVMProxyObservation{MACAddress: MACAddress(d.Ownership.Owner.UID)},
	}
	for _, m := range mods {
		m(&o)
	}
	return o
}

func notReady(msg string) func(*Observation) {
	return func(o *Observation) { o.Ready, o.Endpoint, o.EgressIPs, o.Message = false, "", nil, msg }
}

func TestObserve(t *testing.T) {
	d := desired()
	mac := MACAddress(testUID)
	running := func(mods ...domainModifier) fakeModifier {
		return withDomain(ourDomain(t, d, mods...), golibvirt.DomainRunning, 1)
	}
	type want struct {
		o     Observation
		class backend.Class
	}
	cases := map[string]struct {
		reason string
		fake   []fakeModifier
		d      Desired
		want   want
	}{
		"NotFound": {
			reason: "No domain and no volume is NotFound.",
			d:      d,
			want:   want{class: backend.ClassNotFound},
		},
		"VolumesWithoutDomain": {
			reason: "Volumes named like ours but without our domain are not ours: NotFound, never reported for deletion.",
			fake:   []fakeModifier{withVolume(testPool, seedName(d.Name), 1)},
			d:      d,
			want:   want{class: backend.ClassNotFound},
		},
		"Interrupted": {
			reason: "A claim without disks (Create stopped after claiming) is Pending and out of date, so Update finishes it.",
			fake:   []fakeModifier{withDomain(ourDomain(t, d, withoutDisks()), golibvirt.DomainShutoff, 0)},
			d:      d,
			want: want{o: observation(d, notReady(msgInterrupted), func(o *Observation) {
				o.State, o.UpToDate, o.Diff, o.Extra = commonv1alpha1.StatePending, false, msgInterrupted, v1alpha1.KVMProxyObservation{}
			})},
		},
		"ExternalName": {
			reason: "A name other than the one derived from the owner (an external-name annotation) is Permanent, and names the annotation.",
			fake:   []fakeModifier{withVolume(testPool, "base-seed.iso", 1)},
			d:      desired(withName("base")),
			want:   want{class: backend.ClassPermanent},
		},
		"AnotherProviderInstance": {
			reason: "A domain of another provider deployment is never reported as ours.",
			fake:   []fakeModifier{running(withMetaInstance("other"))},
			d:      d,
			want:   want{class: backend.ClassPermanent},
		},
		"NoMetadata": {
			reason: "A domain without our metadata is not ours.",
			fake:   []fakeModifier{running(withoutMetadata())},
			d:      d,
			want:   want{class: backend.ClassPermanent},
		},
		"ReadyFromLease": {
			reason: "A running domain with a lease for its MAC is Ready at that address.",
			fake:   append(healthyVolumes(d), running(), withAddress(d.Name, golibvirt.DomainInterfaceAddressesSrcLease, mac, "192.168.150.10")),
			d:      d,
			want:   want{o: observation(d)},
		},
		"ReadyFromAgent": {
			reason: "Without a lease the guest agent's address is used.",
			fake:   append(healthyVolumes(d), running(), withAddress(d.Name, golibvirt.DomainInterfaceAddressesSrcAgent, mac, "192.168.150.10")),
			d:      d,
			want:   want{o: observation(d)},
		},
		"AgentBeforeStaleLease": {
			reason: "A replaced VM's MAC still has the old VM's lease: the guest agent's address is the VM's.",
			fake: append(healthyVolumes(d), running(),
				withAddress(d.Name, golibvirt.DomainInterfaceAddressesSrcLease, mac, "192.168.150.99"),
				withAddress(d.Name, golibvirt.DomainInterfaceAddressesSrcAgent, mac, "192.168.150.10")),
			d:    d,
			want: want{o: observation(d)},
		},
		"LeaseOfAnotherMAC": {
			reason: "A stale lease of another MAC is not the VM's address.",
			fake:   append(healthyVolumes(d), running(), withAddress(d.Name, golibvirt.DomainInterfaceAddressesSrcLease, "52:54:00:00:00:01", "192.168.150.99")),
			d:      d,
			want:   want{o: observation(d, notReady(msgWaitLease))},
		},
		"BridgedWaitsForAgent": {
			reason: "A bridged VM's address only comes from the agent; an unresponsive agent is no error.",
			fake: append(healthyVolumes(desired(withBridge("br0"))), withDomain(ourDomain(t, desired(withBridge("br0"))), golibvirt.DomainRunning, 1),
				withAddress(d.Name, golibvirt.DomainInterfaceAddressesSrcLease, mac, "192.168.150.10")),
			d:    desired(withBridge("br0")),
			want: want{o: observation(d, notReady(msgWaitAgent))},
		},
		"Crashed": {
			reason: "A domain shut off by a crash is Terminated.",
			fake:   append(healthyVolumes(d), withDomain(ourDomain(t, d), golibvirt.DomainShutoff, int32(golibvirt.DomainShutoffCrashed))),
			d:      d,
			want: want{o: observation(d, notReady("the domain crashed"), func(o *Observation) {
				o.State = commonv1alpha1.StateTerminated
			})},
		},
		"Paused": {
			reason: "A paused domain is Pending.",
			fake:   append(healthyVolumes(d), withDomain(ourDomain(t, d), golibvirt.DomainPaused, 1)),
			d:      d,
			want: want{o: observation(d, notReady("the domain is paused"), func(o *Observation) {
				o.State = commonv1alpha1.StatePending
			})},
		},
		"MemoryChanged": {
			reason: "A memory change makes the instance out of date.",
			fake:   append(healthyVolumes(d), running(withSpecMemory(128)), withAddress(d.Name, golibvirt.DomainInterfaceAddressesSrcLease, mac, "192.168.150.10")),
			d:      d,
			want: want{o: observation(d, func(o *Observation) {
				o.UpToDate, o.Diff = false, "memory: want 256 MiB, got 128 MiB"
			})},
		},
		"PasswordChanged": {
			reason: "New credentials make the instance out of date, without naming them.",
			fake:   append(healthyVolumes(d), running(), withAddress(d.Name, golibvirt.DomainInterfaceAddressesSrcLease, mac, "192.168.150.10")),
			d:      desired(withPassword("another-password")),
			want: want{o: observation(d, func(o *Observation) {
				o.UpToDate, o.Diff = false, "the proxy credentials changed"
			})},
		},
		"SeedMissing": {
			reason: "A deleted volume makes the instance out of date.",
			fake:   []fakeModifier{withVolume(testPool, overlayName(d.Name), 2*gib), running(), withAddress(d.Name, golibvirt.DomainInterfaceAddressesSrcLease, mac, "192.168.150.10")},
			d:      d,
			want: want{o: observation(d, func(o *Observation) {
				o.UpToDate, o.Diff = false, "volume "+seedName(d.Name)+" is missing"
			})},
		},
		"ConnectionLost": {
			reason: "A bare errno after the daemon died is Transient.",
			fake:   []fakeModifier{withErr("DomainLookupByName", syscall.EINVAL)},
			d:      d,
			want:   want{class: backend.ClassTransient},
		},
		"MalformedName": {
			reason: "A name libvirt would misread is Permanent.",
			d:      desired(withName("../etc")),
			want:   want{class: backend.ClassPermanent},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := testBackend(newFake(tc.fake...), nil)
			o, err := b.Observe(context.Background(), tc.d)
			if diff := cmp.Diff(tc.want, want{o: o, class: backend.ClassOf(err)}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nObserve(...): -want, +got:\n%s\nerror: %v", tc.reason, diff, err)
			}
		})
	}
}

// TestObserveRPCs lists the RPCs of a steady-state Observe (no serve probe):
// what a poll of one proxy costs libvirtd.
func TestObserveRPCs(t *testing.T) {
	d := desired()
	mac := MACAddress(testUID)
	steady := []string{
		"DomainLookupByName " + d.Name,
		"DomainGetState " + d.Name,
		"DomainGetXMLDesc " + d.Name,
		"StoragePoolLookupByName " + testPool,
		"StorageVolLookupByName " + overlayName(d.Name),
		"StorageVolGetXMLDesc " + overlayName(d.Name),
		// The seed's presence is all that matters: no XML.
		"StorageVolLookupByName " + seedName(d.Name),
	}
	cases := map[string]struct {
		reason string
		src    golibvirt.DomainInterfaceAddressesSource
		want   []string
	}{
		"Agent": {
			reason: "The guest agent knows the address: one address RPC.",
			src:    golibvirt.DomainInterfaceAddressesSrcAgent,
			want:   append(append([]string{}, steady...), "DomainInterfaceAddresses "+d.Name),
		},
		"Lease": {
			reason: "Without an agent, the DHCP lease after it: two address RPCs.",
			src:    golibvirt.DomainInterfaceAddressesSrcLease,
			want:   append(append([]string{}, steady...), "DomainInterfaceAddresses "+d.Name, "DomainInterfaceAddresses "+d.Name),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFake(append(healthyVolumes(d), withDomain(ourDomain(t, d), golibvirt.DomainRunning, 1), withAddress(d.Name, tc.src, mac, "192.168.150.10"))...)
			b := testBackend(f, nil)
			if o, err := b.Observe(context.Background(), d); err != nil || !o.Ready || !o.UpToDate {
				t.Fatalf("Observe: %+v, %v", o, err)
			}
			if diff := cmp.Diff(tc.want, f.calls); diff != "" {
				t.Errorf("%s\nRPCs of one steady Observe: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
