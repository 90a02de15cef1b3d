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
	"libvirt.org/go/libvirtxml"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/dialer"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/libvirtd"
)

// TestQEMUPolicy: on a real libvirtd, with the default policy, a KVMProxy
// with its own user data, on a bridge, or whose base image is another VM's
// disk (the disk itself, a clone of it, or another proxy's overlay) is
// refused with nothing created; one that passes boots behind the
// clean-traffic filter.
func TestQEMUPolicy(t *testing.T) {
	d := libvirtd.Start(t)
	p := d.Prepare(t, libvirtd.PrepareOptions{})
	l := d.Dial(t)
	const victim, clone = "platform-db", "clone.qcow2"
	mkvol := func(x string) {
		if _, err := l.StorageVolCreateXML(p.Pool, x, 0); err != nil {
			t.Fatalf("cannot create a volume: %v", err)
		}
	}
	mkvol(`<volume><name>db.qcow2</name><capacity unit='bytes'>1073741824</capacity><target><format type='qcow2'/></target></volume>`)
	mkvol(`<volume><name>` + clone + `</name><capacity unit='bytes'>1073741824</capacity><target><format type='qcow2'/></target>` +
		`<backingStore><path>` + p.PoolPath + `/db.qcow2</path><format type='qcow2'/></backingStore></volume>`)
	// Another VM of the host: defined, shut off, its disk in the pool.
	x := nicDomain(victim, "52:54:00:aa:bb:cc")
	x.Type, x.Memory, x.OS = "qemu", &libvirtxml.DomainMemory{Value: 128, Unit: "MiB"}, &libvirtxml.DomainOS{Type: &libvirtxml.DomainOSType{Type: "hvm"}}
	x.Devices.Disks = []libvirtxml.DomainDisk{fileDisk(p.PoolPath+"/db.qcow2", "qcow2", "disk", "vda", "virtio")}
	doc, err := x.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.DomainDefineXML(doc); err != nil {
		t.Fatalf("cannot define %s: %v", victim, err)
	}
	d.RemoveDomainOnCleanup(t, victim)

	b, err := New(dialer.Target{URI: d.URI("qemu")}, WithPolicy(Policy{Config: lab}), WithBootDevices("network", "hd"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), qemuTimeout)
	defer cancel()
	proxy := func(uid string, mods ...desiredModifier) Desired {
		return desired(append([]desiredModifier{withOwnerUID(uid), withPool(libvirtd.DefaultPool), func(x *Desired) {
			x.Params.BaseImageVolume = libvirtd.DefaultBaseVolume
			x.Params.DiskGiB = 1
			x.Params.MemoryMiB = 128
		}}, mods...)...)
	}
	base := func(v string) desiredModifier { return func(x *Desired) { x.Params.BaseImageVolume = v } }

	good := proxy("0b4f2d7e-1111-4c2a-9d7e-000000000001")
	d.RemoveDomainOnCleanup(t, good.Name)
	if err := b.Create(ctx, good); err != nil {
		t.Fatalf("Create of a proxy the policy allows: %v", err)
	}
	checkFilterBinding(t, l, MACAddress(good.Ownership.Owner.UID))

	refused := map[string]struct {
		d    Desired
		want string
	}{
		"UserData": {
			d: proxy("0b4f2d7e-1111-4c2a-9d7e-000000000002", func(x *Desired) {
				x.Params.UserDataSecretRef = &commonv1alpha1.LocalSecretKeySelector{Name: "ud", Key: "user-data"}
			}),
			want: `spec.forProvider.userDataSecretRef is set but ClusterProviderConfig "lab" spec.policy.kvm.allowUserData is not true`,
		},
		"ForeignBridge": {
			d:    proxy("0b4f2d7e-1111-4c2a-9d7e-000000000003", withBridge("br-mgmt")),
			want: `spec.forProvider.network.bridge "br-mgmt" is not in ClusterProviderConfig "lab" spec.policy.kvm.bridges`,
		},
		"AnotherVMsDisk": {
			d:    proxy("0b4f2d7e-1111-4c2a-9d7e-000000000004", base("db.qcow2")),
			want: `spec.forProvider.baseImageVolume "db.qcow2" is a disk of domain ` + victim,
		},
		"ACloneOfAnotherVMsDisk": {
			d:    proxy("0b4f2d7e-1111-4c2a-9d7e-000000000005", base(clone)),
			want: `spec.forProvider.baseImageVolume "` + clone + `" is an overlay of ` + p.PoolPath + `/db.qcow2`,
		},
		"AnotherProxysDisk": {
			d:    proxy("0b4f2d7e-1111-4c2a-9d7e-000000000006", base(overlayName(good.Name))),
			want: `spec.forProvider.baseImageVolume "` + overlayName(good.Name) + `" is a volume of a proxy instance`,
		},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			err := b.Create(ctx, tc.d)
			if err == nil || !strings.Contains(err.Error(), tc.want) || backend.ClassOf(err) != backend.ClassPermanent {
				t.Errorf("Create: want a Permanent error with %q, got %v", tc.want, err)
			}
			doms, vols := parts(t, l, tc.d.Name)
			if len(doms)+len(vols) != 0 {
				t.Errorf("Create made %v %v", doms, vols)
			}
		})
	}
	if err := b.Delete(ctx, deleteOnly(good)); err != nil {
		t.Fatalf("Delete: %v", err)
	}
}

// checkFilterBinding fails unless libvirt instantiated clean-traffic on
// the NIC with mac.
func checkFilterBinding(t *testing.T, l *golibvirt.Libvirt, mac string) {
	t.Helper()
	bs, _, err := l.ConnectListAllNwfilterBindings(1, 0)
	if err != nil {
		t.Fatalf("cannot list the filter bindings: %v", err)
	}
	var seen []string
	for _, b := range bs {
		doc, err := l.NwfilterBindingGetXMLDesc(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		var x libvirtxml.NWFilterBinding
		if err := x.Unmarshal(doc); err != nil {
			t.Fatal(err)
		}
		if x.MAC != nil && strings.EqualFold(x.MAC.Address, mac) && x.FilterRef != nil && x.FilterRef.Filter == NICFilter {
			return
		}
		seen = append(seen, doc)
	}
	t.Errorf("no %s binding for MAC %s; bindings: %v", NICFilter, mac, seen)
}
