/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"crypto/sha256"
	"net"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"libvirt.org/go/libvirtxml"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

func TestMACAddress(t *testing.T) {
	a, b := MACAddress(testUID), MACAddress("another")
	if a != MACAddress(testUID) || a == b {
		t.Errorf("MACAddress is not a deterministic function of the UID: %s, %s", a, b)
	}
	hw, err := net.ParseMAC(a)
	if err != nil || hw[0] != 0x02 || hw[0]&0x01 != 0 {
		t.Fatalf("MACAddress %s is not a locally administered unicast MAC outside 52:54:00: %v", a, err)
	}
	// 32 bits of the hash, not 24: a 24-bit MAC collides for 1 % of pairs
	// at 580 VMs on one network.
	sum := sha256.Sum256([]byte(testUID))
	if diff := cmp.Diff([]byte(sum[:4]), []byte(hw[2:])); diff != "" {
		t.Errorf("MACAddress %s must end with the first 32 bits of the UID's SHA-256: -want, +got:\n%s", a, diff)
	}
}

func TestDomainXMLBridge(t *testing.T) {
	s := domainSpecFor(desired(withBridge("br0")), "52:54:00:01:02:03", []string{"hd"}, "/o", "/s")
	doc, err := domainXML(s).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// libvirt reads it back the same way.
	x := &libvirtxml.Domain{}
	if err := x.Unmarshal(doc); err != nil {
		t.Fatal(err)
	}
	i := x.Devices.Interfaces[0]
	if i.Source.Bridge == nil || i.Source.Bridge.Bridge != "br0" || i.Source.Network != nil {
		t.Errorf("bridged NIC: %+v", i.Source)
	}
	for _, want := range []string{`machine="q35"`, `<target dev="vdb" bus="virtio">`, `<readonly>`, `name="org.qemu.guest_agent.0"`, `<boot dev="hd">`} {
		if !strings.Contains(doc, want) {
			t.Errorf("domain XML lacks %s:\n%s", want, doc)
		}
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	m := metadata{
		Ownership:      backend.Ownership{Owner: backend.Owner{UID: testUID, Namespace: "ns", Name: "n"}, ProviderInstance: "pi"},
		CreatedAt:      time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Pool:           "default",
		ConfigChecksum: "abc",
		Htpasswd:       "u:$2y$10$hash\n",
		Volumes:        []string{"a.qcow2", "a-seed.iso"},
	}
	doc, err := m.marshal()
	if err != nil {
		t.Fatal(err)
	}
	// libvirt keeps other applications' elements next to ours, and may
	// write ours back with another prefix.
	relabelled := strings.ReplaceAll(doc, "egressproxy:", "ep:")
	relabelled = strings.ReplaceAll(relabelled, "xmlns:egressproxy", "xmlns:ep")
	for name, inner := range map[string]string{
		"AsWritten":   doc,
		"Neighbours":  `<libosinfo:libosinfo xmlns:libosinfo="http://libosinfo.org/xmlns/libvirt/domain/1.0"><libosinfo:os id="x"/></libosinfo:libosinfo>` + doc,
		"OtherPrefix": relabelled,
	} {
		t.Run(name, func(t *testing.T) {
			got, ok, err := parseMetadata(inner)
			if err != nil || !ok {
				t.Fatalf("parseMetadata: %t, %v", ok, err)
			}
			if diff := cmp.Diff(m, got, cmpopts.IgnoreUnexported(metadata{})); diff != "" {
				t.Errorf("metadata round trip: -want, +got:\n%s", diff)
			}
		})
	}
	if _, ok, err := parseMetadata(`<other xmlns="urn:x"><label key="egressproxy-managed-by" value="provider-egressproxy"/></other>`); ok || err != nil {
		t.Errorf("another namespace's element was taken for ours: %t, %v", ok, err)
	}
}

func TestInstanceState(t *testing.T) {
	cases := map[string]struct {
		s    domainState
		want commonv1alpha1.InstanceState
	}{
		"Running":      {domainState{State: golibvirt.DomainRunning}, commonv1alpha1.StateRunning},
		"Blocked":      {domainState{State: golibvirt.DomainBlocked}, commonv1alpha1.StateRunning},
		"Paused":       {domainState{State: golibvirt.DomainPaused}, commonv1alpha1.StatePending},
		"PMSuspended":  {domainState{State: golibvirt.DomainPmsuspended}, commonv1alpha1.StatePending},
		"ShuttingDown": {domainState{State: golibvirt.DomainShutdown}, commonv1alpha1.StateStopped},
		"ShutOff":      {domainState{State: golibvirt.DomainShutoff, Reason: 1}, commonv1alpha1.StateStopped},
		"ShutOffCrash": {domainState{State: golibvirt.DomainShutoff, Reason: int32(golibvirt.DomainShutoffCrashed)}, commonv1alpha1.StateTerminated},
		"Crashed":      {domainState{State: golibvirt.DomainCrashed}, commonv1alpha1.StateTerminated},
		"NoState":      {domainState{State: golibvirt.DomainNostate}, commonv1alpha1.StateUnknown},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got, _ := instanceState(tc.s); got != tc.want {
				t.Errorf("instanceState(%+v): want %s, got %s", tc.s, tc.want, got)
			}
		})
	}
}

func TestPickAddress(t *testing.T) {
	mac := "52:54:00:aa:bb:cc"
	iface := func(hw string, addrs ...string) golibvirt.DomainInterface {
		i := golibvirt.DomainInterface{}
		if hw != "" {
			i.Hwaddr = golibvirt.OptString{hw}
		}
		for _, a := range addrs {
			i.Addrs = append(i.Addrs, golibvirt.DomainIPAddr{Addr: a})
		}
		return i
	}
	cases := map[string]struct {
		ifaces []golibvirt.DomainInterface
		want   string
	}{
		"Lease":         {[]golibvirt.DomainInterface{iface(mac, "192.168.1.5")}, "192.168.1.5"},
		"MACCase":       {[]golibvirt.DomainInterface{iface(strings.ToUpper(mac), "192.168.1.5")}, "192.168.1.5"},
		"OtherMAC":      {[]golibvirt.DomainInterface{iface("52:54:00:00:00:01", "192.168.1.6")}, ""},
		"AgentLoopback": {[]golibvirt.DomainInterface{iface("00:00:00:00:00:00", "127.0.0.1"), iface(mac, "fe80::1", "10.0.0.7")}, "10.0.0.7"},
		"IPv6Only":      {[]golibvirt.DomainInterface{iface(mac, "2001:db8::1")}, ""},
		"None":          {nil, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := pickAddress(tc.ifaces, mac); got != tc.want {
				t.Errorf("pickAddress: want %q, got %q", tc.want, got)
			}
		})
	}
}

func TestUnits(t *testing.T) {
	if got := toMiB(524288, "KiB"); got != 512 {
		t.Errorf("toMiB(524288 KiB): got %d", got)
	}
	if got := toMiB(1, "GiB"); got != 1024 {
		t.Errorf("toMiB(1 GiB): got %d", got)
	}
	if got := toBytes(&libvirtxml.StorageVolumeSize{Value: 2, Unit: "G"}); got != 2*gib {
		t.Errorf("toBytes(2 G): got %d", got)
	}
	ts := &libvirtxml.StorageVolumeTarget{Timestamps: &libvirtxml.StorageVolumeTargetTimestamps{Ctime: "1764504000.5"}}
	if got := changeTime(ts); !got.Equal(time.Unix(1764504000, 500000000)) {
		t.Errorf("changeTime: got %s", got)
	}
	if got := changeTime(&libvirtxml.StorageVolumeTarget{}); !got.IsZero() {
		t.Errorf("changeTime without timestamps: got %s", got)
	}
}

// TestNICFilter: every NIC is behind clean-traffic, and a VM without it
// (made before the backend set it) is out of date, so Update replaces it.
func TestNICFilter(t *testing.T) {
	d := desired()
	x := domainXML(domainSpecFor(d, MACAddress(testUID), []string{"hd"}, "/o", "/s"))
	if got := x.Devices.Interfaces[0].FilterRef; got == nil || got.Filter != "clean-traffic" || len(got.Parameters) != 0 {
		t.Errorf("NIC filter: want clean-traffic, learning the IP; got %+v", got)
	}
	dom := ourDomain(t, d)
	dom.Devices.Interfaces[0].FilterRef = nil
	f := newFake(append(healthyVolumes(d), withDomain(dom, golibvirt.DomainRunning, 1))...)
	o, err := testBackend(f, nil).Observe(context.Background(), d)
	if err != nil || o.UpToDate || !strings.Contains(o.Diff, `network filter: want "clean-traffic", got ""`) {
		t.Errorf("Observe of a VM without the filter: want out of date; got %+v, %v", o, err)
	}
}
