/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"encoding/xml"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// Steps of Create, for crash tests.
const (
	StepClaim   = "claim"
	StepOverlay = "overlay"
	StepSeed    = "seed"
	StepDefine  = "define"
	StepStart   = "start"
)

const (
	errFmtBaseImage    = "cannot use base image volume %s"
	errFmtDiskTooSmall = "diskGiB %d is smaller than the base image (%d bytes)"
	errMarshalDomain   = "cannot marshal the domain XML"
	errDefineDomain    = "cannot define the domain"
	errStartDomain     = "cannot start the domain"
	errFmtRaced        = "volume %s appeared while it was being created: retrying"
	errDomainRaced     = "the domain existed when it was defined but is gone now: retrying"
	errFmtUnowned      = "volume %s already exists in pool %s but no domain of this resource owns it: refusing to adopt or delete it (remove it by hand if it is a leftover)"
	errFmtMACInUse     = "MAC address %s, derived from this resource's UID, is already used by domain %s: two NICs with one MAC break each other's traffic; delete that domain, or delete and re-create this resource to get a new UID and MAC"
)

// Create makes the instance and starts it, without waiting for it to boot:
//
//  1. if d's domain exists (ownership checked) and is complete, start it if
//     it is not running, and stop;
//  2. check d against the policy, refuse a MAC address another domain uses,
//     and check the base image;
//  3. claim: define the domain without disks, with ownership and the names
//     of the volumes it is about to create in its metadata, after checking
//     that no volume has those names (one that does is not ours: Permanent);
//  4. create the overlay of the base image,
//  5. create the seed volume and upload the seed ISO,
//  6. define the domain again, with its disks,
//  7. start it.
//
// A volume is ours only when our domain claimed it before it existed, so
// nothing is ever deleted for having the right name. A crash between any
// two steps leaves a claim (the next Create replaces the claimed volumes and
// carries on, and Delete removes them) or a complete domain (the next Create
// starts it), never a duplicate: names are deterministic.
func (b *Backend) Create(ctx context.Context, d Desired) error {
	if err := checkDesired(d); err != nil {
		return err
	}
	if err := b.policy.check(d.Params); err != nil {
		return err
	}
	defer b.verified.forget(d.Name)
	di, found, err := b.ownedDomain(ctx, d)
	if err != nil {
		return err
	}
	if found && di.complete() {
		return b.start(ctx, di.Dom)
	}
	poolName := withDefaults(d.Params).Pool
	if found {
		poolName = di.Meta.Pool
	}
	pool, err := b.lookupPool(ctx, poolName)
	if err != nil {
		return err
	}
	base, err := b.lookupBaseImage(ctx, pool, d)
	if err != nil {
		return err
	}
	mac := MACAddress(d.Ownership.Owner.UID)
	if err := b.checkHost(ctx, d.Name, mac, pool.Name, base); err != nil {
		return err
	}
	bi, err := baseImageOf(d, base)
	if err != nil {
		return err
	}
	sd, err := b.buildSeed(ctx, d, mac)
	if err != nil {
		return err
	}
	drv, err := b.svc.Driver(ctx)
	if err != nil {
		return classify(err)
	}
	if strings.EqualFold(drv, DriverTest) {
		// The test driver runs no guest to apply a change live.
		sd.Guest = ""
	}
	if found {
		// An earlier Create stopped after claiming: the claimed volumes are
		// ours, and are made afresh (a seed may be half uploaded).
		for _, v := range claimed(di.Meta, d.Name) {
			if err := b.deleteVolume(ctx, pool, v); err != nil {
				return err
			}
		}
	} else {
		if di, err = b.claim(ctx, d, pool, sd); err != nil {
			return err
		}
		if di.complete() {
			// A concurrent Create finished first.
			return b.start(ctx, di.Dom)
		}
	}
	if err := b.step(StepClaim); err != nil {
		return err
	}
	overlay, err := b.createOverlay(ctx, pool, d, bi)
	if err != nil {
		return err
	}
	if err := b.step(StepOverlay); err != nil {
		return err
	}
	seedVol, err := b.createSeed(ctx, pool, d, sd)
	if err != nil {
		return err
	}
	if err := b.step(StepSeed); err != nil {
		return err
	}
	dom, err := b.define(ctx, d, di, sd, domainSpecFor(d, mac, b.boot, volumePath(overlay), volumePath(seedVol)))
	if err != nil {
		return err
	}
	if err := b.step(StepDefine); err != nil {
		return err
	}
	if err := b.start(ctx, dom); err != nil {
		return err
	}
	return b.step(StepStart)
}

// claimed returns the volumes of instance name that m records as owned.
// Only the instance's own names count, whatever else the metadata says.
func claimed(m metadata, name string) []string {
	var out []string
	for _, v := range volumesOf(name) {
		for _, c := range m.Volumes {
			if c == v {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

// claim checks that no volume has the names of d's volumes and defines d's
// domain without disks, recording those names as its own. It returns the
// domain as read back; a domain that appeared meanwhile is adopted only if
// it is d's.
func (b *Backend) claim(ctx context.Context, d Desired, pool golibvirt.StoragePool, sd seed) (domainInfo, error) {
	for _, v := range volumesOf(d.Name) {
		_, err := b.svc.StorageVolLookupByName(ctx, pool, v)
		if err == nil {
			return domainInfo{}, backend.Permanent(errors.Errorf(errFmtUnowned, v, pool.Name))
		}
		if !isNotFound(err) {
			return domainInfo{}, classify(errors.Wrapf(err, errFmtLookupVolume, v))
		}
	}
	m := metadata{Ownership: d.Ownership, CreatedAt: b.now(), Pool: pool.Name, ConfigChecksum: sd.ConfigChecksum, Htpasswd: sd.Htpasswd, Volumes: volumesOf(d.Name), Guest: sd.Guest}
	s := domainSpecFor(d, MACAddress(d.Ownership.Owner.UID), b.boot, "", "")
	if err := b.defineXML(ctx, s, m); err != nil && !isExists(err) {
		return domainInfo{}, err
	}
	di, found, err := b.ownedDomain(ctx, d)
	if err != nil {
		return domainInfo{}, errors.Wrap(err, errDefineDomain)
	}
	if !found {
		return domainInfo{}, backend.Transient(errors.New(errDomainRaced))
	}
	return di, nil
}

// checkHost refuses a MAC address a NIC of another domain of the host has,
// and a base image that another domain uses as a disk (see
// Policy.checkBaseImage). The whole host is searched, not one network: a
// bridge and the libvirt network on it are one segment under two names.
// The devices of a domain already read are taken from b.macs (see macTTL).
func (b *Backend) checkHost(ctx context.Context, name, mac, pool string, base volume) error {
	listed := b.now()
	doms, err := b.svc.ConnectListAllDomains(ctx)
	if err != nil {
		return classify(errors.Wrap(err, errListDomains))
	}
	b.macs.keep(doms, listed)
	disks := map[string][]string{}
	for _, dom := range doms {
		if dom.Name == name {
			continue
		}
		devs, err := b.domainDevices(ctx, dom)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		for _, m := range devs.MACs {
			if strings.EqualFold(m, mac) {
				return backend.Permanent(errors.Errorf(errFmtMACInUse, mac, dom.Name))
			}
		}
		disks[dom.Name] = devs.Disks
	}
	return b.policy.checkBaseImage(base.Vol.Name, base, pool, disks)
}

// devicesOf returns the MAC addresses of a domain's NICs and the sources
// of its disks. It reads nothing else, so no other part of a foreign
// domain's XML can fail it.
func devicesOf(desc string) (devices, error) {
	var x struct {
		NICs []struct {
			MAC struct {
				Address string `xml:"address,attr"`
			} `xml:"mac"`
		} `xml:"devices>interface"`
		Disks []struct {
			Source struct {
				File   string `xml:"file,attr"`
				Dev    string `xml:"dev,attr"`
				Pool   string `xml:"pool,attr"`
				Volume string `xml:"volume,attr"`
			} `xml:"source"`
		} `xml:"devices>disk"`
	}
	if err := xml.Unmarshal([]byte(desc), &x); err != nil {
		return devices{}, errors.Wrap(err, errParseDomainXML)
	}
	var d devices
	for _, n := range x.NICs {
		d.MACs = append(d.MACs, n.MAC.Address)
	}
	for _, dk := range x.Disks {
		s := dk.Source
		switch {
		case s.File != "":
			d.Disks = append(d.Disks, s.File)
		case s.Dev != "":
			d.Disks = append(d.Disks, s.Dev)
		case s.Volume != "":
			d.Disks = append(d.Disks, volumeRef(s.Pool, s.Volume))
		}
	}
	return d, nil
}

// lookupBaseImage looks up the base image of d, before anything is made: a
// missing one is the user's to fix.
func (b *Backend) lookupBaseImage(ctx context.Context, pool golibvirt.StoragePool, d Desired) (volume, error) {
	name := withDefaults(d.Params).BaseImageVolume
	base, err := b.lookupVolume(ctx, pool, name)
	return base, errors.Wrapf(err, errFmtBaseImage, name)
}

// baseImageOf checks that d's disk holds the base image.
func baseImageOf(d Desired, base volume) (baseImage, error) {
	p := withDefaults(d.Params)
	bi := baseImage{Path: volumePath(base), Format: volumeFormat(base), Capacity: toBytes(base.XML.Capacity)}
	if uint64(p.DiskGiB)*gib < bi.Capacity {
		return baseImage{}, backend.Permanent(errors.Errorf(errFmtDiskTooSmall, p.DiskGiB, bi.Capacity))
	}
	return bi, nil
}

// createOverlay creates the VM's disk: a qcow2 overlay of the base image.
func (b *Backend) createOverlay(ctx context.Context, pool golibvirt.StoragePool, d Desired, bi baseImage) (volume, error) {
	v, err := b.createVolume(ctx, pool, overlayVolume(d.Name, uint64(withDefaults(d.Params).DiskGiB)*gib, bi))
	if isExists(err) {
		return volume{}, backend.Transient(errors.Errorf(errFmtRaced, overlayName(d.Name)))
	}
	return v, err
}

// createSeed uploads the seed ISO into a new raw volume. The test driver
// cannot upload (ErrNoSupport), so there the volume stays empty: its
// domains never boot anyway.
func (b *Backend) createSeed(ctx context.Context, pool golibvirt.StoragePool, d Desired, sd seed) (volume, error) {
	iso, err := sd.iso()
	if err != nil {
		return volume{}, err
	}
	v, err := b.createVolume(ctx, pool, seedVolume(d.Name, uint64(len(iso))))
	if isExists(err) {
		return volume{}, backend.Transient(errors.Errorf(errFmtRaced, seedName(d.Name)))
	}
	if err != nil {
		return volume{}, err
	}
	drv, err := b.svc.Driver(ctx)
	if err != nil {
		return volume{}, classify(err)
	}
	if !strings.EqualFold(drv, DriverTest) {
		if err := b.svc.StorageVolUpload(ctx, v.Vol, iso); err != nil {
			return volume{}, classify(errors.Wrapf(err, errFmtUpload, seedName(d.Name)))
		}
	}
	return v, nil
}

// define defines the claimed domain di again, now with its disks: the same
// name and UUID make libvirt replace its definition. The metadata keeps the
// claim's creation time, pool and volumes.
func (b *Backend) define(ctx context.Context, d Desired, di domainInfo, sd seed, s domainSpec) (golibvirt.Domain, error) {
	s.UUID = di.XML.UUID
	m := metadata{Ownership: d.Ownership, CreatedAt: di.Meta.CreatedAt, Pool: di.Meta.Pool, ConfigChecksum: sd.ConfigChecksum, Htpasswd: sd.Htpasswd, Volumes: di.Meta.Volumes, Guest: sd.Guest}
	if err := b.defineXML(ctx, s, m); err != nil {
		return golibvirt.Domain{}, err
	}
	return di.Dom, nil
}

// defineXML defines the domain s with metadata m.
func (b *Backend) defineXML(ctx context.Context, s domainSpec, m metadata) error {
	var err error
	if s.Metadata, err = m.marshal(); err != nil {
		return err
	}
	doc, err := domainXML(s).Marshal()
	if err != nil {
		return errors.Wrap(err, errMarshalDomain)
	}
	_, err = b.svc.DomainDefineXML(ctx, doc)
	return classify(errors.Wrap(err, errDefineDomain))
}

// start starts a domain that is not running. "Already running" is 55 on
// QEMU and 1 on the test driver, so the state decides, not the code.
func (b *Backend) start(ctx context.Context, dom golibvirt.Domain) error {
	st, err := b.svc.DomainGetState(ctx, dom)
	if err != nil {
		return classify(errors.Wrap(err, errDomainState))
	}
	if st.State != golibvirt.DomainShutoff && st.State != golibvirt.DomainCrashed {
		return nil
	}
	err = b.svc.DomainCreate(ctx, dom)
	if err == nil {
		return nil
	}
	if st, serr := b.svc.DomainGetState(ctx, dom); serr == nil && st.State == golibvirt.DomainRunning {
		return nil
	}
	return classify(errors.Wrap(err, errStartDomain))
}

// domainSpecFor builds the domain spec of d.
func domainSpecFor(d Desired, mac string, boot []string, overlay, seedPath string) domainSpec {
	p := withDefaults(d.Params)
	s := domainSpec{
		Name:      d.Name,
		Type:      p.DomainType,
		MemoryMiB: uint(p.MemoryMiB),
		VCPUs:     uint(p.VCPUs),
		Overlay:   overlay,
		Seed:      seedPath,
		MAC:       mac,
		Boot:      boot,
	}
	if p.Network.Bridge != nil {
		s.Bridge = *p.Network.Bridge
	} else {
		s.Network = *p.Network.Name
	}
	return s
}
