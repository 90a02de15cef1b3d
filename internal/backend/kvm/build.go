/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"crypto/sha256"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"libvirt.org/go/libvirtxml"

	"github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
)

// Defaults of KVMProxyParameters, as the API defaults them, for objects no
// API server defaulted (unit tests, the garbage collector's Desired).
const (
	DefaultPool       = v1alpha1.DefaultPool
	DefaultDiskGiB    = v1alpha1.DefaultDiskGiB
	DefaultMemoryMiB  = v1alpha1.DefaultMemoryMiB
	DefaultVCPUs      = v1alpha1.DefaultVCPUs
	DefaultNetwork    = v1alpha1.DefaultNetwork
	DefaultDomainType = v1alpha1.DefaultDomainType
)

// Names of an instance's volumes.
const (
	overlaySuffix = ".qcow2"
	seedSuffix    = "-seed.iso"
)

// Devices of the domain.
const (
	guestAgentChannel = "org.qemu.guest_agent.0"
	diskTarget        = "vda"
	seedTarget        = "vdb"
	gib               = 1 << 30
	// bootDisk is the production boot order: the overlay only.
	bootDisk = "hd"
)

// withDefaults fills what the API would have defaulted.
func withDefaults(p v1alpha1.KVMProxyParameters) v1alpha1.KVMProxyParameters {
	return p.WithDefaults()
}

func overlayName(name string) string { return name + overlaySuffix }
func seedName(name string) string    { return name + seedSuffix }

// volumesOf names the volumes of instance name, in the order Create makes
// them.
func volumesOf(name string) []string { return []string{overlayName(name), seedName(name)} }

// macPrefix starts every NIC's MAC: 02 is a locally administered unicast
// address, outside QEMU's and libvirt's 52:54:00 (which they hand out at
// random to other VMs on the same network), and 0x65 ("e") sets ours apart
// from other tools' 02: addresses (Docker uses 02:42).
const macPrefix = "02:65"

// MACAddress derives the NIC's MAC from the owner's UID: macPrefix and 32
// bits of a SHA-256, so a re-created VM keeps its DHCP lease. Two owners
// share a MAC with a chance of about n²/2³³ for n proxies on one network
// (4·10⁻⁵ at 580); Create refuses a MAC another domain already uses.
func MACAddress(uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	return fmt.Sprintf("%s:%02x:%02x:%02x:%02x", macPrefix, sum[0], sum[1], sum[2], sum[3])
}

// baseImage is what the overlay is built on.
type baseImage struct {
	Path     string
	Format   string
	Capacity uint64
}

// overlayVolume is a qcow2 volume of capacity bytes backed by base: the VM
// writes only its changes, and the base image is shared.
func overlayVolume(name string, capacity uint64, base baseImage) *libvirtxml.StorageVolume {
	return &libvirtxml.StorageVolume{
		Name:     overlayName(name),
		Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: capacity},
		Target:   &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: "qcow2"}},
		BackingStore: &libvirtxml.StorageVolumeBackingStore{
			Path:   base.Path,
			Format: &libvirtxml.StorageVolumeTargetFormat{Type: base.Format},
		},
	}
}

// seedVolume is a raw volume the NoCloud ISO is uploaded into.
func seedVolume(name string, size uint64) *libvirtxml.StorageVolume {
	return &libvirtxml.StorageVolume{
		Name:       seedName(name),
		Capacity:   &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: size},
		Allocation: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: size},
		Target:     &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: "raw"}},
	}
}

// domainSpec is everything the domain XML is built from.
type domainSpec struct {
	Name string
	// UUID is empty for a new domain, and the domain's own when Create
	// defines it again with its disks.
	UUID      string
	Type      string
	MemoryMiB uint
	VCPUs     uint
	// Overlay and Seed are the volumes' paths on the host. File disks, not
	// volume disks: the latter trip AppArmor on many hosts. Both are empty
	// in the claim Create defines first: a domain without disks.
	Overlay string
	Seed    string
	MAC     string
	// Network is a libvirt network, Bridge a host bridge; one is set.
	Network string
	Bridge  string
	Boot    []string
	// Metadata is the marshalled ownership element.
	Metadata string
}

// domainXML builds the VM: q35, a virtio disk on the overlay, the seed as a
// read-only virtio disk (cloud kernels such as Debian's linux-image-cloud
// have no SATA/AHCI driver, so a SATA CD-ROM stays invisible), a virtio NIC
// with the derived MAC behind the clean-traffic filter (NICFilter), the
// guest-agent channel for IP discovery on bridges, and a serial console.
func domainXML(s domainSpec) *libvirtxml.Domain {
	boot := make([]libvirtxml.DomainBootDevice, 0, len(s.Boot))
	for _, dev := range s.Boot {
		boot = append(boot, libvirtxml.DomainBootDevice{Dev: dev})
	}
	var disks []libvirtxml.DomainDisk
	if s.Overlay != "" {
		disks = []libvirtxml.DomainDisk{fileDisk(s.Overlay, "qcow2", "disk", diskTarget, "virtio"), fileDisk(s.Seed, "raw", "disk", seedTarget, "virtio")}
	}
	return &libvirtxml.Domain{
		Type:     s.Type,
		Name:     s.Name,
		UUID:     s.UUID,
		Metadata: &libvirtxml.DomainMetadata{XML: s.Metadata},
		Memory:   &libvirtxml.DomainMemory{Value: s.MemoryMiB, Unit: "MiB"},
		VCPU:     &libvirtxml.DomainVCPU{Value: s.VCPUs},
		OS: &libvirtxml.DomainOS{
			Type:        &libvirtxml.DomainOSType{Type: "hvm", Machine: "q35"},
			BootDevices: boot,
		},
		Features:   &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}, APIC: &libvirtxml.DomainFeatureAPIC{}},
		OnPoweroff: "destroy",
		OnReboot:   "restart",
		OnCrash:    "destroy",
		Devices: &libvirtxml.DomainDeviceList{
			Disks:      disks,
			Interfaces: []libvirtxml.DomainInterface{nic(s)},
			Channels: []libvirtxml.DomainChannel{{
				Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{Mode: "bind"}},
				Target: &libvirtxml.DomainChannelTarget{VirtIO: &libvirtxml.DomainChannelTargetVirtIO{Name: guestAgentChannel}},
			}},
			Serials: []libvirtxml.DomainSerial{{
				Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
				Target: &libvirtxml.DomainSerialTarget{Port: ptr.To[uint](0)},
			}},
			Consoles: []libvirtxml.DomainConsole{{
				Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
				Target: &libvirtxml.DomainConsoleTarget{Type: "serial", Port: ptr.To[uint](0)},
			}},
			RNGs: []libvirtxml.DomainRNG{{
				Model:   "virtio",
				Backend: &libvirtxml.DomainRNGBackend{Random: &libvirtxml.DomainRNGBackendRandom{Device: "/dev/urandom"}},
			}},
		},
	}
}

func fileDisk(path, format, device, target, bus string) libvirtxml.DomainDisk {
	d := libvirtxml.DomainDisk{
		Device: device,
		Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: format},
		Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: path}},
		Target: &libvirtxml.DomainDiskTarget{Dev: target, Bus: bus},
	}
	if target == seedTarget {
		d.ReadOnly = &libvirtxml.DomainDiskReadOnly{}
	}
	return d
}

// NICFilter is the libvirt network filter on every proxy VM's NIC: the
// stock clean-traffic (Debian's libvirt-daemon-config-nwfilter) drops
// frames from any MAC but the NIC's, IP packets from any address but the
// VM's, ARP that claims another's, and all other layer-2 traffic, so a VM
// cannot spoof its neighbours on a shared bridge or network. The VM's
// address is not known before DHCP gives it one, so no IP parameter is
// set: libvirt learns it from the VM's first DHCP or IP packet.
const NICFilter = "clean-traffic"

func nic(s domainSpec) libvirtxml.DomainInterface {
	i := libvirtxml.DomainInterface{
		MAC:       &libvirtxml.DomainInterfaceMAC{Address: s.MAC},
		Model:     &libvirtxml.DomainInterfaceModel{Type: "virtio"},
		FilterRef: &libvirtxml.DomainInterfaceFilterRef{Filter: NICFilter},
	}
	if s.Bridge != "" {
		i.Source = &libvirtxml.DomainInterfaceSource{Bridge: &libvirtxml.DomainInterfaceSourceBridge{Bridge: s.Bridge}}
		return i
	}
	i.Source = &libvirtxml.DomainInterfaceSource{Network: &libvirtxml.DomainInterfaceSourceNetwork{Network: s.Network}}
	return i
}
