/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"testing"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/go-cmp/cmp"
	"libvirt.org/go/libvirtxml"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

func noParts() state {
	return state{Domains: map[string]golibvirt.DomainState{}, Volumes: map[string]uint64{}}
}

func TestDelete(t *testing.T) {
	d := desired()
	all := func(st golibvirt.DomainState, reason int32) []fakeModifier {
		return append(healthyVolumes(d), withDomain(ourDomain(t, d), st, reason))
	}
	cases := map[string]writeCase{
		"Running": {
			reason: "Delete destroys and undefines the domain and deletes both volumes.",
			fake:   all(golibvirt.DomainRunning, 1),
			d:      d,
			want:   written{State: noParts()},
		},
		"ShutOff": {
			reason: "Destroying a domain that is not running (55) is fine.",
			fake:   all(golibvirt.DomainShutoff, 1),
			d:      d,
			want:   written{State: noParts()},
		},
		"OnlyNameAndOwnership": {
			reason: "The garbage collector's Delete finds the pool in the metadata.",
			fake:   all(golibvirt.DomainRunning, 1),
			d:      deleteOnly(d),
			want:   written{State: noParts()},
		},
		"VolumesWithoutDomain": {
			reason: "Without our domain nothing is ours: volumes named like ours stay.",
			fake:   healthyVolumes(d),
			d:      deleteOnly(d),
			want:   written{State: state{Domains: map[string]golibvirt.DomainState{}, Volumes: map[string]uint64{overlayName(d.Name): 2 * gib, seedName(d.Name): 1234}}},
		},
		"ExternalNameOfBaseImage": {
			reason: "An external name other than the derived one is Permanent: with 'base' the overlay's name is the base image's.",
			d:      desired(withName("base")),
			want:   written{State: noParts(), Class: backend.ClassPermanent},
		},
		"Claim": {
			reason: "A claim left by an interrupted Create is deleted with what it claims.",
			fake:   []fakeModifier{withVolume(testPool, overlayName(d.Name), 2*gib), withDomain(ourDomain(t, d, withoutDisks()), golibvirt.DomainShutoff, 0)},
			d:      deleteOnly(d),
			want:   written{State: noParts()},
		},
		"ClaimsOnlyItsOwnNames": {
			reason: "Metadata claiming a volume not named after the instance claims nothing.",
			fake: append(all(golibvirt.DomainRunning, 1), withDomain(ourDomain(t, d, func(_ *domainSpec, m *metadata) {
				m.Volumes = []string{testBase, seedName(d.Name)}
			}), golibvirt.DomainRunning, 1)),
			d:    d,
			want: written{State: state{Domains: map[string]golibvirt.DomainState{}, Volumes: map[string]uint64{overlayName(d.Name): 2 * gib}}},
		},
		"Legacy": {
			reason: "A domain made before claims were recorded owns the instance's volumes its disks use.",
			fake:   append(healthyVolumes(d), withDomain(ourDomain(t, d, withoutClaims()), golibvirt.DomainRunning, 1)),
			d:      deleteOnly(d),
			want:   written{State: noParts()},
		},
		"LegacyDisksElsewhere": {
			reason: "A legacy domain owns no volume its disks do not use, whatever its name.",
			fake: append(healthyVolumes(d), withDomain(ourDomain(t, d, withoutClaims(), func(s *domainSpec, _ *metadata) {
				s.Overlay, s.Seed = "/"+testPool+"/"+testBase, "/elsewhere/seed.iso"
			}), golibvirt.DomainRunning, 1)),
			d:    deleteOnly(d),
			want: written{State: state{Domains: map[string]golibvirt.DomainState{}, Volumes: map[string]uint64{overlayName(d.Name): 2 * gib, seedName(d.Name): 1234}}},
		},
		"Missing": {
			reason: "Deleting what does not exist succeeds.",
			d:      d,
			want:   written{State: noParts()},
		},
		"MissingPool": {
			reason: "A pool that is gone holds no volume.",
			d:      desired(withPool("gone")),
			want:   written{State: noParts()},
		},
		"UndefineFlagsRefused": {
			reason: "When the driver refuses the undefine flags (test driver), Delete undefines without them.",
			fake:   append(all(golibvirt.DomainRunning, 1), withErr("DomainUndefineFlags", lvErr(golibvirt.ErrInvalidArg, "unsupported flags (0x14)"))),
			d:      d,
			want:   written{State: noParts()},
		},
		"AnotherOwner": {
			reason: "A domain of another owner is left alone, with its volumes.",
			fake:   append(healthyVolumes(d), withDomain(ourDomain(t, d, withMetaInstance("other")), golibvirt.DomainRunning, 1)),
			d:      d,
			want: written{Class: backend.ClassPermanent, State: state{Domains: map[string]golibvirt.DomainState{d.Name: golibvirt.DomainRunning},
				Volumes: map[string]uint64{overlayName(d.Name): 2 * gib, seedName(d.Name): 1234}}},
		},
		"VolumeDeleteFails": {
			reason: "A host error deleting a volume is Transient; the domain stays, to own what remains.",
			fake:   append(all(golibvirt.DomainRunning, 1), withErr("StorageVolDelete "+seedName(d.Name), lvErr(golibvirt.ErrSystemError, "cannot unlink file"))),
			d:      d,
			want: written{Class: backend.ClassTransient, State: state{Domains: map[string]golibvirt.DomainState{d.Name: golibvirt.DomainShutoff},
				Volumes: map[string]uint64{seedName(d.Name): 1234}}},
		},
		"Malformed": {
			reason: "A malformed name is Permanent.",
			d:      desired(withName("a b")),
			want:   written{State: noParts(), Class: backend.ClassPermanent},
		},
	}
	runWrites(t, "Delete", func(b *Backend, d Desired) error { return b.Delete(context.Background(), d) }, cases)
}

func TestUpdate(t *testing.T) {
	d := desired()
	mac := MACAddress(testUID)
	kept := state{Domains: map[string]golibvirt.DomainState{d.Name: golibvirt.DomainRunning}, Volumes: map[string]uint64{overlayName(d.Name): 2 * gib, seedName(d.Name): 1234}}
	cases := map[string]writeCase{
		"UpToDate": {
			reason: "An up-to-date running instance is left alone.",
			fake:   append(healthyVolumes(d), withDomain(ourDomain(t, d), golibvirt.DomainRunning, 1), withAddress(d.Name, golibvirt.DomainInterfaceAddressesSrcLease, mac, "192.168.150.10")),
			d:      d,
			want:   written{State: kept},
		},
		"Stopped": {
			reason: "A stopped instance is deleted, to be created again.",
			fake:   append(healthyVolumes(d), withDomain(ourDomain(t, d), golibvirt.DomainShutoff, 1)),
			d:      d,
			want:   written{State: noParts()},
		},
		"ConfigChangedOnOldGuest": {
			reason: "A running instance with another allowlist, made before its guest could apply one live, is replaced.",
			fake:   append(healthyVolumes(d), withDomain(ourDomain(t, d, withGuestVersion("")), golibvirt.DomainRunning, 1)),
			d:      desired(withDestinations("api.example.org")),
			want:   written{State: noParts()},
		},
		"VolumesWithoutDomain": {
			reason: "Volumes without our domain are not ours: left alone.",
			fake:   healthyVolumes(d),
			d:      d,
			want:   written{State: state{Domains: map[string]golibvirt.DomainState{}, Volumes: map[string]uint64{overlayName(d.Name): 2 * gib, seedName(d.Name): 1234}}},
		},
		"Interrupted": {
			reason: "Update finishes what an interrupted Create began.",
			fake:   []fakeModifier{withDomain(ourDomain(t, d, withoutDisks()), golibvirt.DomainShutoff, 0)},
			d:      d,
			want:   written{State: state{Domains: map[string]golibvirt.DomainState{d.Name: golibvirt.DomainRunning}, Volumes: map[string]uint64{overlayName(d.Name): 2 * gib, seedName(d.Name): 0}, Uploaded: []string{seedName(d.Name)}}},
		},
		"Gone": {
			reason: "Updating what is gone does nothing.",
			d:      d,
			want:   written{State: noParts()},
		},
	}
	// Update fails in none of them.
	runWrites(t, "Update", func(b *Backend, d Desired) error { return b.Update(context.Background(), d) }, cases)
}

func TestList(t *testing.T) {
	d := desired()
	other := desired(withOwnerUID("another-uid"))
	foreign := &libvirtxml.Domain{Type: "kvm", Name: "someone-elses-vm"}
	orphan := "egp-gone-12345678"
	type want struct {
		List  []backend.Instance
		Class backend.Class
	}
	cases := map[string]struct {
		reason string
		fake   []fakeModifier
		want   want
	}{
		"OnlyOurDomains": {
			reason: "List returns our domains, whatever their provider instance, and nothing else: no foreign domain, and no volume, whatever its name.",
			fake: append(healthyVolumes(d),
				withDomain(ourDomain(t, d), golibvirt.DomainRunning, 1),
				withDomain(ourDomain(t, other, withMetaInstance("other")), golibvirt.DomainShutoff, 1),
				withDomain(foreign, golibvirt.DomainRunning, 1),
				withVolume(testPool, seedName(orphan), 1),
				withVolume(testPool, overlayName(orphan), 1),
				withVolume(testPool, "unrelated.qcow2", 1)),
			want: want{List: []backend.Instance{
				{ID: FormatInstanceID(testPool, other.Name), Name: other.Name, Ownership: backend.Ownership{Owner: other.Ownership.Owner, ProviderInstance: "other"}, CreatedAt: created, State: commonv1alpha1.StateStopped},
				{ID: FormatInstanceID(testPool, d.Name), Name: d.Name, Ownership: d.Ownership, CreatedAt: created, State: commonv1alpha1.StateRunning},
			}},
		},
		"ListDomainsFails": {
			reason: "List fails as a whole.",
			fake:   []fakeModifier{withErr("ConnectListAllDomains", lvErr(golibvirt.ErrInternalError, "boom"))},
			want:   want{Class: backend.ClassTransient},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l, err := testBackend(newFake(tc.fake...), nil).List(context.Background())
			if diff := cmp.Diff(tc.want, want{List: l, Class: backend.ClassOf(err)}); diff != "" {
				t.Errorf("%s\nList(): -want, +got:\n%s\nerror: %v", tc.reason, diff, err)
			}
		})
	}
}
