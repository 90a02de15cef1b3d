/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"sort"
	"strings"
	"testing"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	"libvirt.org/go/libvirtxml"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// state is what a test reads back from the fake after a call.
type state struct {
	// Domains maps domain names to their state.
	Domains map[string]golibvirt.DomainState
	// Volumes maps volume names of the test pool to their capacity.
	Volumes map[string]uint64
	// Uploaded lists the volumes something was uploaded into.
	Uploaded []string
}

func stateOf(f *fake) state {
	s := state{Domains: map[string]golibvirt.DomainState{}, Volumes: map[string]uint64{}}
	for n, d := range f.domains {
		s.Domains[n] = d.state.State
	}
	for n, v := range f.pools[testPool] {
		if n != testBase {
			s.Volumes[n] = toBytes(v.Capacity)
		}
	}
	for n := range f.uploaded {
		s.Uploaded = append(s.Uploaded, n)
	}
	sort.Strings(s.Uploaded)
	return s
}

func withBaseCapacity(c uint64) fakeModifier {
	return func(f *fake) { f.pools[testPool][testBase].Capacity.Value = c }
}

// withDefineRace makes DomainDefineXML find a domain a concurrent Create
// defined a moment earlier.
func withDefineRace(x *libvirtxml.Domain) fakeModifier {
	return func(f *fake) {
		f.errs["DomainDefineXML"] = lvErr(golibvirt.ErrOperationFailed, "operation failed: domain '"+x.Name+"' already exists with uuid 1")
		f.onDefine = func() {
			delete(f.errs, "DomainDefineXML")
			withDomain(x, golibvirt.DomainShutoff, 0)(f)
		}
	}
}

// nicDomain is someone else's domain with one NIC.
func nicDomain(name, mac string) *libvirtxml.Domain {
	return &libvirtxml.Domain{Type: "kvm", Name: name, Devices: &libvirtxml.DomainDeviceList{
		Interfaces: []libvirtxml.DomainInterface{{
			MAC:    &libvirtxml.DomainInterfaceMAC{Address: mac},
			Source: &libvirtxml.DomainInterfaceSource{Network: &libvirtxml.DomainInterfaceSourceNetwork{Network: "default"}},
		}},
	}}
}

// A written is what the fake holds after a Create, Update or Delete, and
// the class of the call's error.
type written struct {
	State state
	Class backend.Class
}

// A writeCase is one Create, Update or Delete on a fake made by its
// modifiers.
type writeCase struct {
	reason string
	fake   []fakeModifier
	d      Desired
	want   written
}

// runWrites runs each case's call, which must leave the base image. The
// seed's size depends on bcrypt's output: only its presence counts.
func runWrites(t *testing.T, op string, call func(*Backend, Desired) error, cases map[string]writeCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFake(tc.fake...)
			err := call(testBackend(f, nil), tc.d)
			if f.pools[testPool][testBase] == nil {
				t.Fatalf("%s\n%s(...) deleted the base image", tc.reason, op)
			}
			got := written{State: stateOf(f), Class: backend.ClassOf(err)}
			if v, ok := got.State.Volumes[seedName(tc.d.Name)]; ok && v != 1234 {
				got.State.Volumes[seedName(tc.d.Name)] = 0
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n%s(...): -want, +got:\n%s\nerror: %v", tc.reason, op, diff, err)
			}
		})
	}
}

func TestCreate(t *testing.T) {
	d := desired()
	created := func(uploaded ...string) state {
		return state{
			Domains:  map[string]golibvirt.DomainState{d.Name: golibvirt.DomainRunning},
			Volumes:  map[string]uint64{overlayName(d.Name): 2 * gib, seedName(d.Name): 0},
			Uploaded: uploaded,
		}
	}
	cases := map[string]writeCase{
		"Fresh": {
			reason: "Create makes both volumes, uploads the seed, defines and starts the domain.",
			d:      d,
			want:   written{State: created(seedName(d.Name))},
		},
		"TestDriver": {
			reason: "The test driver cannot upload, so the seed stays empty there.",
			fake:   []fakeModifier{withDriver("TEST")},
			d:      d,
			want:   written{State: created()},
		},
		"OwnDomainShutOff": {
			reason: "A crash after defining: Create starts the domain it finds.",
			fake:   append(healthyVolumes(d), withDomain(ourDomain(t, d), golibvirt.DomainShutoff, 0)),
			d:      d,
			want:   written{State: state{Domains: map[string]golibvirt.DomainState{d.Name: golibvirt.DomainRunning}, Volumes: map[string]uint64{overlayName(d.Name): 2 * gib, seedName(d.Name): 1234}}},
		},
		"UnownedVolumes": {
			reason: "Volumes named like ours that no domain of ours claims are neither adopted nor deleted.",
			fake:   []fakeModifier{withVolume(testPool, overlayName(d.Name), 1), withVolume(testPool, seedName(d.Name), 1234)},
			d:      d,
			want: written{Class: backend.ClassPermanent, State: state{Domains: map[string]golibvirt.DomainState{},
				Volumes: map[string]uint64{overlayName(d.Name): 1, seedName(d.Name): 1234}}},
		},
		"ClaimedVolumes": {
			reason: "After a crash following the claim, the claimed volumes are ours: they are made afresh and the domain completed.",
			fake: []fakeModifier{withDomain(ourDomain(t, d, withoutDisks()), golibvirt.DomainShutoff, 0),
				withVolume(testPool, overlayName(d.Name), 1), withVolume(testPool, seedName(d.Name), 1)},
			d:    d,
			want: written{State: created(seedName(d.Name))},
		},
		"ExternalNameOfBaseImage": {
			reason: "An external name other than the derived one is refused before anything is touched: with 'base' the overlay would be the base image.",
			d:      desired(withName("base")),
			want:   written{State: noParts(), Class: backend.ClassPermanent},
		},
		"MACInUse": {
			reason: "A MAC another domain already uses is refused before anything is made.",
			fake:   []fakeModifier{withDomain(nicDomain("someone-elses-vm", strings.ToUpper(MACAddress(testUID))), golibvirt.DomainRunning, 1)},
			d:      d,
			want: written{Class: backend.ClassPermanent, State: state{Domains: map[string]golibvirt.DomainState{"someone-elses-vm": golibvirt.DomainRunning},
				Volumes: map[string]uint64{}}},
		},
		"OtherMACs": {
			reason: "Other domains with other MACs are no conflict.",
			fake:   []fakeModifier{withDomain(nicDomain("someone-elses-vm", "52:54:00:12:34:56"), golibvirt.DomainRunning, 1)},
			d:      d,
			want: written{State: func() state {
				s := created(seedName(d.Name))
				s.Domains["someone-elses-vm"] = golibvirt.DomainRunning
				return s
			}()},
		},
		"AnotherOwner": {
			reason: "A domain of another provider instance is never adopted.",
			fake:   []fakeModifier{withDomain(ourDomain(t, d, withMetaInstance("other")), golibvirt.DomainRunning, 1)},
			d:      d,
			want:   written{State: state{Domains: map[string]golibvirt.DomainState{d.Name: golibvirt.DomainRunning}, Volumes: map[string]uint64{}}, Class: backend.ClassPermanent},
		},
		"DefineRaceOurs": {
			reason: "A complete domain that appeared meanwhile and is ours is adopted and started.",
			fake:   []fakeModifier{withDefineRace(ourDomain(t, d))},
			d:      d,
			want:   written{State: state{Domains: map[string]golibvirt.DomainState{d.Name: golibvirt.DomainRunning}, Volumes: map[string]uint64{}}},
		},
		"DefineRaceTheirs": {
			reason: "A domain that appeared meanwhile and is not ours is Permanent, and nothing was made.",
			fake:   []fakeModifier{withDefineRace(ourDomain(t, d, withMetaInstance("other")))},
			d:      d,
			want:   written{Class: backend.ClassPermanent, State: state{Domains: map[string]golibvirt.DomainState{d.Name: golibvirt.DomainShutoff}, Volumes: map[string]uint64{}}},
		},
		"NoPool": {
			reason: "A missing pool is NotFound.",
			d:      desired(withPool("nope")),
			want:   written{State: noParts(), Class: backend.ClassNotFound},
		},
		"NoBaseImage": {
			reason: "A missing base image is NotFound, found before anything is made.",
			d:      desired(func(d *Desired) { d.Params.BaseImageVolume = "nope" }),
			want:   written{State: noParts(), Class: backend.ClassNotFound},
		},
		"DiskTooSmall": {
			reason: "A disk smaller than the base image is Permanent.",
			fake:   []fakeModifier{withBaseCapacity(20 * gib)},
			d:      d,
			want:   written{State: noParts(), Class: backend.ClassPermanent},
		},
		"PoolFull": {
			reason: "A full pool is Quota; the claim stays for Update or Delete.",
			fake:   []fakeModifier{withErr("StorageVolCreateXML", lvErr(golibvirt.ErrSystemError, "cannot allocate 2147483648 bytes in file: No space left on device"))},
			d:      d,
			want:   written{State: state{Domains: map[string]golibvirt.DomainState{d.Name: golibvirt.DomainShutoff}, Volumes: map[string]uint64{}}, Class: backend.ClassQuota},
		},
		"BadDomainXML": {
			reason: "A domain libvirt refuses (67) is Permanent.",
			fake:   []fakeModifier{withErr("DomainDefineXML", lvErr(golibvirt.ErrConfigUnsupported, "unsupported configuration"))},
			d:      d,
			want:   written{Class: backend.ClassPermanent, State: noParts()},
		},
		"UserDataWithoutSource": {
			reason: "userDataSecretRef needs a way to read Secrets.",
			d: desired(func(d *Desired) {
				d.Params.UserDataSecretRef = &commonv1alpha1.LocalSecretKeySelector{Name: "ud", Key: "user-data"}
			}),
			want: written{Class: backend.ClassPermanent, State: noParts()},
		},
		"Malformed": {
			reason: "A malformed name is Permanent.",
			d:      desired(withName("")),
			want:   written{State: noParts(), Class: backend.ClassPermanent},
		},
	}
	runWrites(t, "Create", func(b *Backend, d Desired) error { return b.Create(context.Background(), d) }, cases)
}

func TestCreateDomainXML(t *testing.T) {
	f := newFake()
	b := testBackend(f, nil, WithBootDevices("network", "hd"))
	d := desired(func(d *Desired) { d.Params.Network.Name = ptr.To("nat0") })
	if err := b.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	x := &libvirtxml.Domain{}
	if err := x.Unmarshal(f.domains[d.Name].xml); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{
		"boot":    x.OS.BootDevices[0].Dev + "," + x.OS.BootDevices[1].Dev,
		"disk":    x.Devices.Disks[0].Source.File.File,
		"seed":    x.Devices.Disks[1].Source.File.File + " " + x.Devices.Disks[1].Target.Bus,
		"network": x.Devices.Interfaces[0].Source.Network.Network,
		"mac":     x.Devices.Interfaces[0].MAC.Address,
	}
	want := map[string]string{
		"boot":    "network,hd",
		"disk":    "/" + testPool + "/" + overlayName(d.Name),
		"seed":    "/" + testPool + "/" + seedName(d.Name) + " virtio",
		"network": "nat0",
		"mac":     MACAddress(testUID),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defined domain: -want, +got:\n%s", diff)
	}
	m, ours, err := parseMetadata(x.Metadata.XML)
	if err != nil || !ours || x.UUID != fakeUUID(d.Name) {
		t.Fatalf("metadata: %t, %v; UUID %q: the claim's UUID must be kept", ours, err, x.UUID)
	}
	if diff := cmp.Diff(volumesOf(d.Name), m.Volumes); diff != "" {
		t.Errorf("claimed volumes: -want, +got:\n%s", diff)
	}
	overlay := f.pools[testPool][overlayName(d.Name)]
	if overlay.BackingStore == nil || overlay.BackingStore.Path != "/"+testPool+"/"+testBase || overlay.BackingStore.Format.Type != "qcow2" {
		t.Errorf("overlay backing store: %+v", overlay.BackingStore)
	}
}
