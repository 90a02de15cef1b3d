/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package guestvm

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/kdomanski/iso9660"
	"k8s.io/utils/ptr"
	"libvirt.org/go/libvirtxml"
)

// MetadataAddr is the metadata server's address, as on GCE.
const MetadataAddr = "169.254.169.254"

const errSeed = "cannot write the NoCloud seed"

// vendorData stands in for Compute Engine's guest agent; format arguments:
// the metadata server's address and the startup-script, base64-encoded.
const vendorData = `#!/bin/sh
# The stand-in for Compute Engine: the metadata server's name, and a unit
# that runs the instance's startup-script at every boot, as root, as the
# guest agent does.
set -eu
echo '%s metadata.google.internal metadata' >>/etc/hosts
mkdir -p /var/lib/gce-stand-in
echo '%s' | base64 -d >/var/lib/gce-stand-in/startup-script
cat >/etc/systemd/system/gce-startup-script.service <<'UNIT'
[Unit]
Description=The instance's startup-script (stands in for the GCE guest agent)
Wants=network-online.target
After=network-online.target cloud-final.service

[Service]
Type=oneshot
ExecStart=/bin/bash /var/lib/gce-stand-in/startup-script
StandardOutput=journal+console

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable gce-startup-script.service
systemctl start --no-block gce-startup-script.service
`

// VendorData is a cloud-init vendor-data script that does what the GCE
// guest agent does with an instance's startup-script: run it as root at
// every boot. It also names the metadata server, as GCE's images do.
func VendorData(startupScript string) string {
	return fmt.Sprintf(vendorData, MetadataAddr, base64.StdEncoding.EncodeToString([]byte(startupScript)))
}

// Seed returns a NoCloud seed ISO (label cidata) for a guest named name,
// with the instance's user-data and a vendor-data.
func Seed(name, userData, vendor string) ([]byte, error) {
	w, err := iso9660.NewWriter()
	if err != nil {
		return nil, errors.Wrap(err, errSeed)
	}
	defer w.Cleanup() //nolint:errcheck // A temporary directory.
	for f, data := range map[string]string{
		"meta-data":   "instance-id: " + name + "\nlocal-hostname: " + name + "\n",
		"user-data":   userData,
		"vendor-data": vendor,
	} {
		if err := w.AddFile(strings.NewReader(data), f); err != nil {
			return nil, errors.Wrap(err, errSeed)
		}
	}
	var buf bytes.Buffer
	if err := w.WriteTo(&buf, "cidata"); err != nil {
		return nil, errors.Wrap(err, errSeed)
	}
	return buf.Bytes(), nil
}

// A Machine is what Domain needs to know of one guest.
type Machine struct {
	Name string
	// Disk is a qcow2 copy of the guest image, Seed the NoCloud ISO,
	// Console the file the serial console is logged to.
	Disk, Seed, Console string
	// Network is the libvirt network of its NIC, MAC the NIC's address
	// (empty: libvirt picks one).
	Network, MAC string
	MemoryMiB    uint
}

// Domain is a TCG q35 VM with BIOS that boots the disk, reads the seed
// from a read-only virtio disk (the cloud kernel has no SATA/AHCI driver),
// and has the guest agent's channel and a serial console logged to a file.
func Domain(m Machine) *libvirtxml.Domain {
	file := func(path, format, target string, ro bool) libvirtxml.DomainDisk {
		d := libvirtxml.DomainDisk{
			Device: "disk",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: format},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: path}},
			Target: &libvirtxml.DomainDiskTarget{Dev: target, Bus: "virtio"},
		}
		if ro {
			d.ReadOnly = &libvirtxml.DomainDiskReadOnly{}
		}
		return d
	}
	nic := libvirtxml.DomainInterface{
		Source: &libvirtxml.DomainInterfaceSource{Network: &libvirtxml.DomainInterfaceSourceNetwork{Network: m.Network}},
		Model:  &libvirtxml.DomainInterfaceModel{Type: "virtio"},
	}
	if m.MAC != "" {
		nic.MAC = &libvirtxml.DomainInterfaceMAC{Address: m.MAC}
	}
	return &libvirtxml.Domain{
		Type:   "qemu",
		Name:   m.Name,
		Memory: &libvirtxml.DomainMemory{Value: m.MemoryMiB, Unit: "MiB"},
		// Two TCG threads get the guest a fairer share of a busy host.
		VCPU: &libvirtxml.DomainVCPU{Value: 2},
		OS: &libvirtxml.DomainOS{
			Type:        &libvirtxml.DomainOSType{Arch: "x86_64", Machine: "q35", Type: "hvm"},
			BootDevices: []libvirtxml.DomainBootDevice{{Dev: "hd"}},
		},
		Features:   &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}, APIC: &libvirtxml.DomainFeatureAPIC{}},
		OnPoweroff: "destroy",
		OnReboot:   "restart",
		Devices: &libvirtxml.DomainDeviceList{
			Disks:      []libvirtxml.DomainDisk{file(m.Disk, "qcow2", "vda", false), file(m.Seed, "raw", "vdb", true)},
			Interfaces: []libvirtxml.DomainInterface{nic},
			Channels: []libvirtxml.DomainChannel{{
				Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{Mode: "bind"}},
				Target: &libvirtxml.DomainChannelTarget{VirtIO: &libvirtxml.DomainChannelTargetVirtIO{Name: "org.qemu.guest_agent.0"}},
			}},
			Serials: []libvirtxml.DomainSerial{{
				Source: &libvirtxml.DomainChardevSource{File: &libvirtxml.DomainChardevSourceFile{Path: m.Console}},
				Target: &libvirtxml.DomainSerialTarget{Port: ptr.To[uint](0)},
			}},
			RNGs: []libvirtxml.DomainRNG{{
				Model:   "virtio",
				Backend: &libvirtxml.DomainRNGBackend{Random: &libvirtxml.DomainRNGBackendRandom{Device: "/dev/urandom"}},
			}},
		},
	}
}
