/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package libvirt

import (
	"context"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// Steps of Create, for crash tests.
const (
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
)

// Create makes the instance and starts it, without waiting for it to boot:
//
//  1. if d's domain exists (ownership checked), start it if it is not
//     running, and stop;
//  2. otherwise delete any volumes named like d's (left by a crash or an
//     interrupted replacement: a disk that booted before would keep
//     cloud-init from running the new seed), then
//  3. create the overlay of the base image,
//  4. create the seed volume and upload the seed ISO,
//  5. define the domain, with ownership in its metadata,
//  6. start it.
//
// A crash between any two steps leaves either no domain (the next Create
// starts over at 2, deleting the partial volumes) or a defined domain (the
// next Create starts it), never a duplicate: names are deterministic.
func (b *Backend) Create(ctx context.Context, d Desired) error {
	if err := checkName(d.Name); err != nil {
		return err
	}
	di, found, err := b.ownedDomain(ctx, d)
	if err != nil {
		return err
	}
	if found {
		return b.start(ctx, di.Dom)
	}
	p := withDefaults(d.Params)
	pool, err := b.lookupPool(ctx, p.Pool)
	if err != nil {
		return err
	}
	for _, v := range []string{overlayName(d.Name), seedName(d.Name)} {
		if err := b.deleteVolume(ctx, pool, v); err != nil {
			return err
		}
	}
	overlay, err := b.createOverlay(ctx, pool, d)
	if err != nil {
		return err
	}
	if err := b.step(StepOverlay); err != nil {
		return err
	}
	mac := MACAddress(d.Ownership.Owner.UID)
	sd, seedVol, err := b.createSeed(ctx, pool, d, mac)
	if err != nil {
		return err
	}
	if err := b.step(StepSeed); err != nil {
		return err
	}
	dom, err := b.define(ctx, d, domainSpecFor(d, mac, b.boot, volumePath(overlay), volumePath(seedVol)), sd)
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

// createOverlay creates the VM's disk: a qcow2 overlay of the base image.
func (b *Backend) createOverlay(ctx context.Context, pool golibvirt.StoragePool, d Desired) (volume, error) {
	p := withDefaults(d.Params)
	base, err := b.lookupVolume(ctx, pool, p.BaseImageVolume)
	if err != nil {
		return volume{}, errors.Wrapf(err, errFmtBaseImage, p.BaseImageVolume)
	}
	bi := baseImage{Path: volumePath(base), Format: volumeFormat(base), Capacity: toBytes(base.XML.Capacity)}
	capacity := uint64(p.DiskGiB) * gib
	if capacity < bi.Capacity {
		return volume{}, backend.Permanent(errors.Errorf(errFmtDiskTooSmall, p.DiskGiB, bi.Capacity))
	}
	v, err := b.createVolume(ctx, pool, overlayVolume(d.Name, capacity, bi))
	if isExists(err) {
		return volume{}, backend.Transient(errors.Errorf(errFmtRaced, overlayName(d.Name)))
	}
	return v, err
}

// createSeed builds the seed ISO and uploads it into a new raw volume. The
// test driver cannot upload (ErrNoSupport), so there the volume stays
// empty: its domains never boot anyway.
func (b *Backend) createSeed(ctx context.Context, pool golibvirt.StoragePool, d Desired, mac string) (seed, volume, error) {
	sd, err := b.buildSeed(ctx, d, mac)
	if err != nil {
		return seed{}, volume{}, err
	}
	iso, err := sd.iso()
	if err != nil {
		return seed{}, volume{}, err
	}
	v, err := b.createVolume(ctx, pool, seedVolume(d.Name, uint64(len(iso))))
	if isExists(err) {
		return seed{}, volume{}, backend.Transient(errors.Errorf(errFmtRaced, seedName(d.Name)))
	}
	if err != nil {
		return seed{}, volume{}, err
	}
	drv, err := b.svc.Driver(ctx)
	if err != nil {
		return seed{}, volume{}, classify(err)
	}
	if !strings.EqualFold(drv, DriverTest) {
		if err := b.svc.StorageVolUpload(ctx, v.Vol, iso); err != nil {
			return seed{}, volume{}, classify(errors.Wrapf(err, errFmtUpload, seedName(d.Name)))
		}
	}
	return sd, v, nil
}

// define defines the domain. "Already exists" means a concurrent Create
// won; its domain is adopted only if it is d's.
func (b *Backend) define(ctx context.Context, d Desired, s domainSpec, sd seed) (golibvirt.Domain, error) {
	p := withDefaults(d.Params)
	m := metadata{Ownership: d.Ownership, CreatedAt: b.now(), Pool: p.Pool, ConfigChecksum: sd.ConfigChecksum, Htpasswd: sd.Htpasswd}
	var err error
	if s.Metadata, err = m.marshal(); err != nil {
		return golibvirt.Domain{}, err
	}
	doc, err := domainXML(s).Marshal()
	if err != nil {
		return golibvirt.Domain{}, errors.Wrap(err, errMarshalDomain)
	}
	dom, err := b.svc.DomainDefineXML(ctx, doc)
	if isExists(err) {
		di, found, err := b.ownedDomain(ctx, d)
		if err != nil {
			return golibvirt.Domain{}, errors.Wrap(err, errDefineDomain)
		}
		if !found {
			return golibvirt.Domain{}, backend.Transient(errors.New(errDomainRaced))
		}
		return di.Dom, nil
	}
	return dom, classify(errors.Wrap(err, errDefineDomain))
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
