/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"bytes"
	"context"

	golibvirt "github.com/digitalocean/go-libvirt"
)

// Driver types ConnectGetType reports; compare them case-insensitively.
const (
	DriverQEMU = "QEMU"
	DriverTest = "TEST"
)

// domainState is what DomainGetState returns.
type domainState struct {
	State  golibvirt.DomainState
	Reason int32
}

// service lists the libvirt calls the backend makes, each bounded by ctx.
// Unit tests use a fake of it; rpc serves it with go-libvirt.
type service interface {
	// Driver returns the driver type of the connection ("QEMU", "Test").
	Driver(ctx context.Context) (string, error)

	DomainLookupByName(ctx context.Context, name string) (golibvirt.Domain, error)
	DomainGetState(ctx context.Context, dom golibvirt.Domain) (domainState, error)
	DomainGetXMLDesc(ctx context.Context, dom golibvirt.Domain) (string, error)
	DomainDefineXML(ctx context.Context, xml string) (golibvirt.Domain, error)
	DomainCreate(ctx context.Context, dom golibvirt.Domain) error
	DomainDestroy(ctx context.Context, dom golibvirt.Domain) error
	DomainUndefineFlags(ctx context.Context, dom golibvirt.Domain, flags golibvirt.DomainUndefineFlagsValues) error
	DomainInterfaceAddresses(ctx context.Context, dom golibvirt.Domain, source golibvirt.DomainInterfaceAddressesSource) ([]golibvirt.DomainInterface, error)
	// DomainSetMetadata replaces the element of namespace ns in the
	// domain's <metadata>, in the running domain and its definition.
	DomainSetMetadata(ctx context.Context, dom golibvirt.Domain, element, prefix, ns string) error
	ConnectListAllDomains(ctx context.Context) ([]golibvirt.Domain, error)

	ConnectListAllStoragePools(ctx context.Context) ([]golibvirt.StoragePool, error)
	StoragePoolLookupByName(ctx context.Context, name string) (golibvirt.StoragePool, error)
	StoragePoolListAllVolumes(ctx context.Context, pool golibvirt.StoragePool) ([]golibvirt.StorageVol, error)
	StorageVolLookupByName(ctx context.Context, pool golibvirt.StoragePool, name string) (golibvirt.StorageVol, error)
	StorageVolGetXMLDesc(ctx context.Context, vol golibvirt.StorageVol) (string, error)
	StorageVolCreateXML(ctx context.Context, pool golibvirt.StoragePool, xml string) (golibvirt.StorageVol, error)
	StorageVolUpload(ctx context.Context, vol golibvirt.StorageVol, data []byte) error
	StorageVolDelete(ctx context.Context, vol golibvirt.StorageVol) error
}

// rpc serves service over a pooled Conn.
type rpc struct{ c *Conn }

type none struct{}

func call(ctx context.Context, c *Conn, fn func(*golibvirt.Libvirt) error) error {
	_, err := do(ctx, c, func(l *golibvirt.Libvirt) (none, error) { return none{}, fn(l) })
	return err
}

func (r rpc) Driver(ctx context.Context) (string, error) { return r.c.driver(ctx) }

func (r rpc) DomainLookupByName(ctx context.Context, name string) (golibvirt.Domain, error) {
	return do(ctx, r.c, func(l *golibvirt.Libvirt) (golibvirt.Domain, error) { return l.DomainLookupByName(name) })
}

func (r rpc) DomainGetState(ctx context.Context, dom golibvirt.Domain) (domainState, error) {
	return do(ctx, r.c, func(l *golibvirt.Libvirt) (domainState, error) {
		s, reason, err := l.DomainGetState(dom, 0)
		return domainState{State: golibvirt.DomainState(s), Reason: reason}, err
	})
}

func (r rpc) DomainGetXMLDesc(ctx context.Context, dom golibvirt.Domain) (string, error) {
	return do(ctx, r.c, func(l *golibvirt.Libvirt) (string, error) { return l.DomainGetXMLDesc(dom, 0) })
}

func (r rpc) DomainDefineXML(ctx context.Context, xml string) (golibvirt.Domain, error) {
	return do(ctx, r.c, func(l *golibvirt.Libvirt) (golibvirt.Domain, error) { return l.DomainDefineXML(xml) })
}

func (r rpc) DomainCreate(ctx context.Context, dom golibvirt.Domain) error {
	return call(ctx, r.c, func(l *golibvirt.Libvirt) error { return l.DomainCreate(dom) })
}

func (r rpc) DomainDestroy(ctx context.Context, dom golibvirt.Domain) error {
	return call(ctx, r.c, func(l *golibvirt.Libvirt) error { return l.DomainDestroyFlags(dom, 0) })
}

func (r rpc) DomainUndefineFlags(ctx context.Context, dom golibvirt.Domain, flags golibvirt.DomainUndefineFlagsValues) error {
	return call(ctx, r.c, func(l *golibvirt.Libvirt) error { return l.DomainUndefineFlags(dom, flags) })
}

func (r rpc) DomainInterfaceAddresses(ctx context.Context, dom golibvirt.Domain, source golibvirt.DomainInterfaceAddressesSource) ([]golibvirt.DomainInterface, error) {
	return do(ctx, r.c, func(l *golibvirt.Libvirt) ([]golibvirt.DomainInterface, error) {
		return l.DomainInterfaceAddresses(dom, uint32(source), 0)
	})
}

func (r rpc) DomainSetMetadata(ctx context.Context, dom golibvirt.Domain, element, prefix, ns string) error {
	return call(ctx, r.c, func(l *golibvirt.Libvirt) error {
		return l.DomainSetMetadata(dom, int32(golibvirt.DomainMetadataElement), golibvirt.OptString{element}, golibvirt.OptString{prefix}, golibvirt.OptString{ns},
			golibvirt.DomainAffectLive|golibvirt.DomainAffectConfig)
	})
}

func (r rpc) ConnectListAllDomains(ctx context.Context) ([]golibvirt.Domain, error) {
	return do(ctx, r.c, func(l *golibvirt.Libvirt) ([]golibvirt.Domain, error) {
		d, _, err := l.ConnectListAllDomains(1, 0)
		return d, err
	})
}

func (r rpc) ConnectListAllStoragePools(ctx context.Context) ([]golibvirt.StoragePool, error) {
	return do(ctx, r.c, func(l *golibvirt.Libvirt) ([]golibvirt.StoragePool, error) {
		p, _, err := l.ConnectListAllStoragePools(1, golibvirt.ConnectListStoragePoolsActive)
		return p, err
	})
}

func (r rpc) StoragePoolLookupByName(ctx context.Context, name string) (golibvirt.StoragePool, error) {
	return do(ctx, r.c, func(l *golibvirt.Libvirt) (golibvirt.StoragePool, error) { return l.StoragePoolLookupByName(name) })
}

func (r rpc) StoragePoolListAllVolumes(ctx context.Context, pool golibvirt.StoragePool) ([]golibvirt.StorageVol, error) {
	return do(ctx, r.c, func(l *golibvirt.Libvirt) ([]golibvirt.StorageVol, error) {
		v, _, err := l.StoragePoolListAllVolumes(pool, 1, 0)
		return v, err
	})
}

func (r rpc) StorageVolLookupByName(ctx context.Context, pool golibvirt.StoragePool, name string) (golibvirt.StorageVol, error) {
	return do(ctx, r.c, func(l *golibvirt.Libvirt) (golibvirt.StorageVol, error) { return l.StorageVolLookupByName(pool, name) })
}

func (r rpc) StorageVolGetXMLDesc(ctx context.Context, vol golibvirt.StorageVol) (string, error) {
	return do(ctx, r.c, func(l *golibvirt.Libvirt) (string, error) { return l.StorageVolGetXMLDesc(vol, 0) })
}

func (r rpc) StorageVolCreateXML(ctx context.Context, pool golibvirt.StoragePool, xml string) (golibvirt.StorageVol, error) {
	return do(ctx, r.c, func(l *golibvirt.Libvirt) (golibvirt.StorageVol, error) { return l.StorageVolCreateXML(pool, xml, 0) })
}

func (r rpc) StorageVolUpload(ctx context.Context, vol golibvirt.StorageVol, data []byte) error {
	return doOnce(ctx, r.c, func(l *golibvirt.Libvirt) error {
		return l.StorageVolUpload(vol, bytes.NewReader(data), 0, uint64(len(data)), 0)
	})
}

func (r rpc) StorageVolDelete(ctx context.Context, vol golibvirt.StorageVol) error {
	return call(ctx, r.c, func(l *golibvirt.Libvirt) error { return l.StorageVolDelete(vol, 0) })
}
