package libvirtd

import (
	"encoding/binary"
	mbits "math/bits"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"
)

// Defaults of PrepareOptions.
const (
	DefaultPool           = "default"
	DefaultNetwork        = "default"
	DefaultSubnet         = "192.168.150.0/24"
	DefaultBaseVolume     = "base.qcow2"
	DefaultBaseVolumeSize = 1 << 30
)

const (
	errLookupPool     = "cannot look up the storage pool"
	errDefinePool     = "cannot define the storage pool"
	errBuildPool      = "cannot build the storage pool"
	errStartPool      = "cannot start the storage pool"
	errDescribePool   = "cannot read the storage pool's XML"
	errLookupNetwork  = "cannot look up the network"
	errDefineNetwork  = "cannot define the network"
	errStartNetwork   = "cannot start the network"
	errDescribeNet    = "cannot read the network's XML"
	errLookupVolume   = "cannot look up the base volume"
	errCreateVolume   = "cannot create the base volume"
	errVolumePath     = "cannot get the base volume's path"
	errAutostart      = "cannot mark it autostart"
	errIsActive       = "cannot tell whether it is active"
	errMarshal        = "cannot marshal the XML"
	errUnmarshal      = "cannot parse the XML"
	errNoDHCP         = "the network has no IPv4 address with a DHCP range"
	errFmtSubnet      = "subnet %s must be IPv4 with room for a gateway and a DHCP range (/30 or larger)"
	errFmtParseSubnet = "cannot parse the subnet %q"
)

// PrepareOptions selects what Prepare makes. Zero values select the defaults.
type PrepareOptions struct {
	// Pool is the name of a dir storage pool under Base/pools/.
	Pool string
	// Network is the name of a NAT network with DHCP. It lives only in the
	// sandbox's network namespace, so any subnet is safe.
	Network string
	// Subnet of the network: the gateway takes the first address and DHCP
	// hands out the rest but the broadcast address.
	Subnet netip.Prefix
	// BaseVolume is the name of a blank qcow2 volume in the pool.
	BaseVolume string
	// BaseVolumeSize is the virtual size of BaseVolume in bytes.
	BaseVolumeSize uint64
}

// Prepared describes what Prepare made or found. Handles are plain values and
// work on any connection to the daemon.
type Prepared struct {
	// Pool is the dir storage pool; PoolPath its directory on the host.
	Pool     libvirt.StoragePool
	PoolPath string
	// Network is the NAT network. Subnet, Gateway and the DHCP range come
	// from its XML, so they describe a network that existed before too.
	Network   libvirt.Network
	Subnet    netip.Prefix
	Gateway   netip.Addr
	DHCPStart netip.Addr
	DHCPEnd   netip.Addr
	// BaseVolume is the blank qcow2 volume; BaseVolumePath its file.
	BaseVolume     libvirt.StorageVol
	BaseVolumePath string
}

// Prepare makes, or finds and starts, a dir storage pool, a NAT network with
// DHCP, and a blank qcow2 base volume, all marked autostart. It is
// idempotent: what exists is kept as it is, and Prepared describes what
// really exists.
func (d *Daemon) Prepare(t testing.TB, o PrepareOptions) Prepared {
	t.Helper()
	o, err := o.withDefaults()
	if err != nil {
		t.Fatalf("bad PrepareOptions: %v", err)
	}
	l := d.Dial(t)
	var p Prepared
	t0 := time.Now()
	if p.Pool, p.PoolPath, err = ensurePool(l, o.Pool, filepath.Join(d.Base, "pools", o.Pool)); err != nil {
		t.Fatalf("pool %q: %v", o.Pool, err)
	}
	t1 := time.Now()
	if err := ensureNetwork(l, o.Network, o.Subnet, &p); err != nil {
		t.Fatalf("network %q: %v", o.Network, err)
	}
	t2 := time.Now()
	if p.BaseVolume, p.BaseVolumePath, err = ensureVolume(l, p.Pool, o.BaseVolume, o.BaseVolumeSize); err != nil {
		t.Fatalf("volume %q: %v", o.BaseVolume, err)
	}
	t.Logf("libvirtd prepare: pool %s, network %s, volume %s", t1.Sub(t0).Round(time.Millisecond),
		t2.Sub(t1).Round(time.Millisecond), time.Since(t2).Round(time.Millisecond))
	return p
}

func (o PrepareOptions) withDefaults() (PrepareOptions, error) {
	if o.Pool == "" {
		o.Pool = DefaultPool
	}
	if o.Network == "" {
		o.Network = DefaultNetwork
	}
	if !o.Subnet.IsValid() {
		s, err := netip.ParsePrefix(DefaultSubnet)
		if err != nil {
			return o, errors.Wrapf(err, errFmtParseSubnet, DefaultSubnet)
		}
		o.Subnet = s
	}
	if o.BaseVolume == "" {
		o.BaseVolume = DefaultBaseVolume
	}
	if o.BaseVolumeSize == 0 {
		o.BaseVolumeSize = DefaultBaseVolumeSize
	}
	return o, nil
}

func ensurePool(l *libvirt.Libvirt, name, path string) (libvirt.StoragePool, string, error) {
	p, err := l.StoragePoolLookupByName(name)
	if hasCode(err, libvirt.ErrNoStoragePool) {
		if p, err = definePool(l, name, path); err != nil {
			return p, "", err
		}
	} else if err != nil {
		return p, "", errors.Wrap(err, errLookupPool)
	}
	active, err := l.StoragePoolIsActive(p)
	if err != nil {
		return p, "", errors.Wrap(err, errIsActive)
	}
	if active == 0 {
		if err := l.StoragePoolCreate(p, 0); err != nil {
			return p, "", errors.Wrap(err, errStartPool)
		}
	}
	desc, err := l.StoragePoolGetXMLDesc(p, 0)
	if err != nil {
		return p, "", errors.Wrap(err, errDescribePool)
	}
	var x libvirtxml.StoragePool
	if err := x.Unmarshal(desc); err != nil {
		return p, "", errors.Wrap(err, errUnmarshal)
	}
	if x.Target == nil {
		return p, "", nil
	}
	return p, x.Target.Path, nil
}

func definePool(l *libvirt.Libvirt, name, path string) (libvirt.StoragePool, error) {
	x, err := (&libvirtxml.StoragePool{Type: "dir", Name: name, Target: &libvirtxml.StoragePoolTarget{Path: path}}).Marshal()
	if err != nil {
		return libvirt.StoragePool{}, errors.Wrap(err, errMarshal)
	}
	p, err := l.StoragePoolDefineXML(x, 0)
	if err != nil {
		return p, errors.Wrap(err, errDefinePool)
	}
	if err := l.StoragePoolBuild(p, 0); err != nil {
		return p, errors.Wrap(err, errBuildPool)
	}
	return p, errors.Wrap(l.StoragePoolSetAutostart(p, 1), errAutostart)
}

func ensureNetwork(l *libvirt.Libvirt, name string, subnet netip.Prefix, p *Prepared) error {
	n, err := l.NetworkLookupByName(name)
	if hasCode(err, libvirt.ErrNoNetwork) {
		x, err := networkXML(name, subnet)
		if err != nil {
			return err
		}
		if n, err = l.NetworkDefineXML(x); err != nil {
			return errors.Wrap(err, errDefineNetwork)
		}
		if err := l.NetworkSetAutostart(n, 1); err != nil {
			return errors.Wrap(err, errAutostart)
		}
	} else if err != nil {
		return errors.Wrap(err, errLookupNetwork)
	}
	active, err := l.NetworkIsActive(n)
	if err != nil {
		return errors.Wrap(err, errIsActive)
	}
	if active == 0 {
		if err := l.NetworkCreate(n); err != nil {
			return errors.Wrap(err, errStartNetwork)
		}
	}
	desc, err := l.NetworkGetXMLDesc(n, 0)
	if err != nil {
		return errors.Wrap(err, errDescribeNet)
	}
	p.Network = n
	return describeNetwork(desc, p)
}

func ensureVolume(l *libvirt.Libvirt, pool libvirt.StoragePool, name string, size uint64) (libvirt.StorageVol, string, error) {
	v, err := l.StorageVolLookupByName(pool, name)
	if hasCode(err, libvirt.ErrNoStorageVol) {
		x, err := (&libvirtxml.StorageVolume{
			Name:     name,
			Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: size},
			Target:   &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: "qcow2"}},
		}).Marshal()
		if err != nil {
			return v, "", errors.Wrap(err, errMarshal)
		}
		if v, err = l.StorageVolCreateXML(pool, x, 0); err != nil {
			return v, "", errors.Wrap(err, errCreateVolume)
		}
	} else if err != nil {
		return v, "", errors.Wrap(err, errLookupVolume)
	}
	path, err := l.StorageVolGetPath(v)
	return v, path, errors.Wrap(err, errVolumePath)
}

// networkXML builds a NAT network whose gateway is the subnet's first address
// and whose DHCP range is the rest but the broadcast address. libvirt picks
// the bridge name, so several networks can coexist.
func networkXML(name string, subnet netip.Prefix) (string, error) {
	subnet = subnet.Masked()
	if !subnet.Addr().Is4() || subnet.Bits() > 30 {
		return "", errors.Errorf(errFmtSubnet, subnet)
	}
	gw := subnet.Addr().Next()
	n := libvirtxml.Network{
		Name:    name,
		Forward: &libvirtxml.NetworkForward{Mode: "nat"},
		IPs: []libvirtxml.NetworkIP{{
			Address: gw.String(),
			Prefix:  uint(subnet.Bits()),
			DHCP: &libvirtxml.NetworkDHCP{Ranges: []libvirtxml.NetworkDHCPRange{{
				Start: gw.Next().String(),
				End:   lastAddr(subnet).Prev().String(),
			}}},
		}},
	}
	x, err := n.Marshal()
	return x, errors.Wrap(err, errMarshal)
}

// describeNetwork fills the addressing of p from a network's XML.
func describeNetwork(desc string, p *Prepared) error {
	var n libvirtxml.Network
	if err := n.Unmarshal(desc); err != nil {
		return errors.Wrap(err, errUnmarshal)
	}
	for _, ip := range n.IPs {
		gw, err := netip.ParseAddr(ip.Address)
		if err != nil || !gw.Is4() || ip.DHCP == nil || len(ip.DHCP.Ranges) == 0 {
			continue
		}
		bits := int(ip.Prefix)
		if ip.Netmask != "" {
			m, err := netip.ParseAddr(ip.Netmask)
			if err != nil {
				continue
			}
			b := m.As4()
			bits = 32 - mbits.TrailingZeros32(binary.BigEndian.Uint32(b[:]))
		}
		start, err1 := netip.ParseAddr(ip.DHCP.Ranges[0].Start)
		end, err2 := netip.ParseAddr(ip.DHCP.Ranges[0].End)
		if err1 != nil || err2 != nil {
			continue
		}
		p.Subnet = netip.PrefixFrom(gw, bits).Masked()
		p.Gateway, p.DHCPStart, p.DHCPEnd = gw, start, end
		return nil
	}
	return errors.New(errNoDHCP)
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	n := binary.BigEndian.Uint32(b[:]) | (uint32(1)<<(32-p.Bits()) - 1)
	binary.BigEndian.PutUint32(b[:], n)
	return netip.AddrFrom4(b)
}

// hasCode reports whether err is a libvirt error with the given code.
func hasCode(err error, code libvirt.ErrorNumber) bool {
	var e libvirt.Error
	return errors.As(err, &e) && e.Code == uint32(code)
}
