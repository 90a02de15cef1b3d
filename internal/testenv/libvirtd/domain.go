package libvirtd

import (
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"
)

const (
	errLookupDomain   = "cannot look up the domain"
	errDestroyDomain  = "cannot destroy the domain"
	errUndefineDomain = "cannot undefine the domain"

	leasePoll = 250 * time.Millisecond
)

// NetbootDomain returns a minimal TCG q35 domain with no disk that boots from
// the network first. Its virtio NIC on network runs iPXE, which asks the
// network's DHCP server for a lease, so lease-based IP discovery works with
// no OS (~10 s after DomainCreate). With network "" it has no NIC and just
// idles in the BIOS. Either way it reaches DomainRunning at once.
func NetbootDomain(name, network string) *libvirtxml.Domain {
	d := &libvirtxml.Domain{
		Type:   "qemu",
		Name:   name,
		Memory: &libvirtxml.DomainMemory{Value: 128, Unit: "MiB"},
		VCPU:   &libvirtxml.DomainVCPU{Value: 1},
		OS: &libvirtxml.DomainOS{
			Type:        &libvirtxml.DomainOSType{Arch: "x86_64", Machine: "q35", Type: "hvm"},
			BootDevices: []libvirtxml.DomainBootDevice{{Dev: "network"}, {Dev: "hd"}},
		},
		Devices: &libvirtxml.DomainDeviceList{},
	}
	if network != "" {
		d.Devices.Interfaces = []libvirtxml.DomainInterface{{
			Source: &libvirtxml.DomainInterfaceSource{Network: &libvirtxml.DomainInterfaceSourceNetwork{Network: network}},
			Model:  &libvirtxml.DomainInterfaceModel{Type: "virtio"},
		}}
	}
	return d
}

// WaitForLease polls the domain's DHCP leases (the "lease" address source)
// until one inside subnet appears, and fails the test after timeout.
func WaitForLease(t testing.TB, l *libvirt.Libvirt, dom libvirt.Domain, subnet netip.Prefix, timeout time.Duration) netip.Addr {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ifaces, err := l.DomainInterfaceAddresses(dom, uint32(libvirt.DomainInterfaceAddressesSrcLease), 0)
		last = err
		for _, i := range ifaces {
			for _, a := range i.Addrs {
				if ip, err := netip.ParseAddr(a.Addr); err == nil && subnet.Contains(ip) {
					return ip
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("domain %s got no DHCP lease in %s within %s (last error: %v)", dom.Name, subnet, timeout, last)
		}
		time.Sleep(leasePoll)
	}
}

// RemoveDomainOnCleanup destroys and undefines the named domain at the end of
// the test, if it exists, over a connection of its own: the test's
// connections may be gone by then. Register it before defining the domain.
func (d *Daemon) RemoveDomainOnCleanup(t testing.TB, name string) {
	t.Helper()
	t.Cleanup(func() {
		u, err := url.Parse(d.URI("qemu"))
		if err != nil {
			t.Errorf("cannot remove domain %s: %v", name, err)
			return
		}
		l, err := libvirt.ConnectToURI(u)
		if err != nil {
			// The daemon is down; stopping the sandbox kills the VM anyway.
			t.Logf("cannot connect to remove domain %s: %v", name, err)
			return
		}
		defer l.Disconnect() //nolint:errcheck // Best effort at cleanup.
		if err := RemoveDomain(l, name); err != nil {
			t.Errorf("cannot remove domain %s: %v", name, err)
		}
	})
}

// RemoveDomain destroys the named domain if it runs and undefines it. A
// domain that does not exist is not an error.
func RemoveDomain(l *libvirt.Libvirt, name string) error {
	dom, err := l.DomainLookupByName(name)
	if hasCode(err, libvirt.ErrNoDomain) {
		return nil
	}
	if err != nil {
		return errors.Wrap(err, errLookupDomain)
	}
	if err := l.DomainDestroyFlags(dom, 0); err != nil && !hasCode(err, libvirt.ErrOperationInvalid) {
		return errors.Wrap(err, errDestroyDomain)
	}
	err = l.DomainUndefineFlags(dom, libvirt.DomainUndefineManagedSave|libvirt.DomainUndefineSnapshotsMetadata|libvirt.DomainUndefineNvram)
	if hasCode(err, libvirt.ErrInvalidArg) {
		// The test driver rejects the NVRAM flag.
		err = l.DomainUndefineFlags(dom, 0)
	}
	if hasCode(err, libvirt.ErrNoDomain) {
		return nil
	}
	return errors.Wrap(err, errUndefineDomain)
}
