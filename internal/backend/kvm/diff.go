/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"fmt"
	"strings"

	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
)

// instanceState maps a domain state to an instance state:
//   - running and blocked (a running domain whose vCPUs wait; only Xen
//     reports it) are Running;
//   - paused and pmsuspended are Pending: the domain exists and may resume,
//     and a person may have paused it on purpose, so it is not replaced;
//   - shutdown (going down) and shutoff are Stopped, and replaced;
//   - shut off for no known reason (neverStarted) is Pending: Update starts it;
//   - crashed, or shut off because it crashed, is Terminated, and replaced;
//   - nostate is Unknown.
func instanceState(s domainState) (commonv1alpha1.InstanceState, string) {
	switch s.State {
	case golibvirt.DomainRunning, golibvirt.DomainBlocked:
		return commonv1alpha1.StateRunning, ""
	case golibvirt.DomainPaused:
		return commonv1alpha1.StatePending, "the domain is paused"
	case golibvirt.DomainPmsuspended:
		return commonv1alpha1.StatePending, "the guest suspended itself"
	case golibvirt.DomainShutdown:
		return commonv1alpha1.StateStopped, "the domain is shutting down"
	case golibvirt.DomainShutoff:
		if golibvirt.DomainShutoffReason(s.Reason) == golibvirt.DomainShutoffCrashed {
			return commonv1alpha1.StateTerminated, "the domain crashed"
		}
		if neverStarted(s) {
			return commonv1alpha1.StatePending, msgNeverStarted
		}
		return commonv1alpha1.StateStopped, "the domain is shut off"
	case golibvirt.DomainCrashed:
		return commonv1alpha1.StateTerminated, "the domain crashed"
	case golibvirt.DomainNostate:
	}
	return commonv1alpha1.StateUnknown, "libvirt reports no state for the domain"
}

// msgNeverStarted says why a domain that Create defined is not running.
const msgNeverStarted = "the domain is defined but was never started"

// neverStarted reports a domain shut off for no known reason: one defined
// and never started (Create was killed between defining and starting it),
// or one that was shut off when libvirtd started, which forgets why. A
// domain a person or its guest stopped, or libvirt destroyed, says so
// (shutdown, destroyed, ...) and is replaced; this one is started, as
// Create would have done, instead of being deleted and made again.
func neverStarted(s domainState) bool {
	return s.State == golibvirt.DomainShutoff && golibvirt.DomainShutoffReason(s.Reason) == golibvirt.DomainShutoffUnknown
}

// observedVM is what Observe compares with the desired instance.
type observedVM struct {
	Type      string
	MemoryMiB uint64
	VCPUs     uint
	MAC       string
	// Filter is the NIC's network filter; a VM made before the backend
	// set one is replaced.
	Filter string
	// OverlayBytes is the overlay's capacity; 0 when it is missing.
	OverlayBytes uint64
	// Missing names volumes that are gone.
	Missing []string
	// ConfigChecksum and Htpasswd come from the metadata.
	ConfigChecksum string
	Htpasswd       string
}

// wantedVM is the desired side of the comparison.
type wantedVM struct {
	Type           string
	MemoryMiB      uint64
	VCPUs          uint
	MAC            string
	Filter         string
	DiskBytes      uint64
	ConfigChecksum string
	// CredentialsMatch reports whether the htpasswd on the seed accepts the
	// desired credentials; nil when they are not checked.
	CredentialsMatch func(htpasswd string) bool
}

// vmDiff is what differs, for Observation.Diff. It never names a
// credential, only that it changed.
type vmDiff struct {
	// replace lists what only a new VM changes: the domain, its disks, its
	// NIC.
	replace []string
	// live lists what the running guest can take (applyLive): the squid
	// configuration and the credentials.
	live []string
}

func (v vmDiff) all() []string { return append(append([]string{}, v.replace...), v.live...) }

// diff lists what differs between want and got.
func diff(want wantedVM, got observedVM) vmDiff {
	var d vmDiff
	for _, v := range got.Missing {
		d.replace = append(d.replace, fmt.Sprintf("volume %s is missing", v))
	}
	if want.Type != got.Type {
		d.replace = append(d.replace, fmt.Sprintf("domain type: want %s, got %s", want.Type, got.Type))
	}
	if want.MemoryMiB != got.MemoryMiB {
		d.replace = append(d.replace, fmt.Sprintf("memory: want %d MiB, got %d MiB", want.MemoryMiB, got.MemoryMiB))
	}
	if want.VCPUs != got.VCPUs {
		d.replace = append(d.replace, fmt.Sprintf("vcpus: want %d, got %d", want.VCPUs, got.VCPUs))
	}
	if !strings.EqualFold(want.MAC, got.MAC) {
		d.replace = append(d.replace, fmt.Sprintf("MAC address: want %s, got %s", want.MAC, got.MAC))
	}
	if want.Filter != got.Filter {
		d.replace = append(d.replace, fmt.Sprintf("network filter: want %q, got %q", want.Filter, got.Filter))
	}
	if got.OverlayBytes != 0 && want.DiskBytes != got.OverlayBytes {
		d.replace = append(d.replace, fmt.Sprintf("disk: want %d GiB, got %d bytes", want.DiskBytes/gib, got.OverlayBytes))
	}
	if want.ConfigChecksum != got.ConfigChecksum {
		d.live = append(d.live, fmt.Sprintf("config checksum: want %s, got %s", want.ConfigChecksum, got.ConfigChecksum))
	}
	if want.CredentialsMatch != nil && !want.CredentialsMatch(got.Htpasswd) {
		d.live = append(d.live, "the proxy credentials changed")
	}
	return d
}

// vmFromXML reads what diff compares from a domain's XML.
func vmFromXML(x *libvirtxml.Domain) observedVM {
	vm := observedVM{Type: x.Type}
	if x.Memory != nil {
		vm.MemoryMiB = toMiB(uint64(x.Memory.Value), x.Memory.Unit)
	}
	if x.VCPU != nil {
		vm.VCPUs = x.VCPU.Value
	}
	if x.Devices != nil {
		for _, i := range x.Devices.Interfaces {
			if i.MAC != nil {
				vm.MAC = i.MAC.Address
				if i.FilterRef != nil {
					vm.Filter = i.FilterRef.Filter
				}
				break
			}
		}
	}
	return vm
}

// toMiB converts a libvirt memory value; libvirt reports KiB.
func toMiB(v uint64, unit string) uint64 {
	switch strings.ToLower(unit) {
	case "b", "bytes":
		return v >> 20
	case "", "k", "kib":
		return v >> 10
	case "kb":
		return v * 1000 >> 20
	case "m", "mib":
		return v
	case "mb":
		return v * 1000 * 1000 >> 20
	case "g", "gib":
		return v << 10
	case "gb":
		return v * 1000 * 1000 * 1000 >> 20
	}
	return v >> 10
}

// wanted returns the desired side of the comparison for p.
func wanted(p v1alpha1.KVMProxyParameters, mac, checksum string) wantedVM {
	return wantedVM{
		Type:           p.DomainType,
		MemoryMiB:      uint64(p.MemoryMiB),
		VCPUs:          uint(p.VCPUs),
		MAC:            mac,
		Filter:         NICFilter,
		DiskBytes:      uint64(p.DiskGiB) * gib,
		ConfigChecksum: checksum,
	}
}
