/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"
)

const (
	errDestroyDomain  = "cannot destroy the domain"
	errUndefineDomain = "cannot undefine the domain"
	errListPools      = "cannot list the storage pools"

	// undefineFlags also drop what a domain may have gathered: a managed
	// save image, snapshot and checkpoint metadata, and UEFI NVRAM.
	undefineFlags = golibvirt.DomainUndefineManagedSave | golibvirt.DomainUndefineSnapshotsMetadata |
		golibvirt.DomainUndefineCheckpointsMetadata | golibvirt.DomainUndefineNvram
)

// Delete destroys d's domain, deletes the volumes it owns, then undefines
// it. It is idempotent and needs only d.Name and d.Ownership: the pool and
// the volumes come from the domain's metadata. A domain of another owner is
// a Permanent error and is left alone, with its volumes. Without our domain
// nothing is deleted: a volume is never ours for its name alone. The domain
// goes last, so a crash in between leaves it to own what remains.
func (b *Backend) Delete(ctx context.Context, d Desired) error {
	if err := checkDesired(d); err != nil {
		return err
	}
	defer b.verified.forget(d.Name)
	di, found, err := b.ownedDomain(ctx, d)
	if err != nil || !found {
		return err
	}
	if err := b.destroy(ctx, di.Dom); err != nil {
		return err
	}
	pool, vols, err := b.ownedVolumes(ctx, di, d.Name)
	if err != nil {
		return err
	}
	for _, v := range vols {
		if err := b.deleteVolume(ctx, pool, v); err != nil {
			return err
		}
	}
	return b.undefine(ctx, di.Dom)
}

// ownedVolumes returns the pool and the volumes the owned domain di of
// instance name owns: those its metadata claims. A domain made before
// claims were recorded owns the instance's volumes its disks use.
func (b *Backend) ownedVolumes(ctx context.Context, di domainInfo, name string) (golibvirt.StoragePool, []string, error) {
	pool, err := b.lookupPool(ctx, di.Meta.Pool)
	if isNotFound(err) {
		return pool, nil, nil
	}
	if err != nil {
		return pool, nil, err
	}
	if di.Meta.Volumes != nil {
		return pool, claimed(di.Meta, name), nil
	}
	disks := map[string]bool{}
	if di.XML.Devices != nil {
		for _, dk := range di.XML.Devices.Disks {
			if dk.Source != nil && dk.Source.File != nil {
				disks[dk.Source.File.File] = true
			}
		}
	}
	var out []string
	for _, v := range volumesOf(name) {
		x, err := b.volumeXML(ctx, pool, v)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return pool, nil, err
		}
		if x.Target != nil && disks[x.Target.Path] {
			out = append(out, v)
		}
	}
	return pool, out, nil
}

// destroy stops a domain if it runs.
func (b *Backend) destroy(ctx context.Context, dom golibvirt.Domain) error {
	err := b.svc.DomainDestroy(ctx, dom)
	if err != nil && !isNotFound(err) && !hasCode(err, golibvirt.ErrOperationInvalid) {
		return classify(errors.Wrap(err, errDestroyDomain))
	}
	return nil
}

// undefine undefines a domain. The test driver refuses the NVRAM flag with
// ErrInvalidArg, and older drivers lack some flags (ErrNoSupport): then it
// undefines without flags.
func (b *Backend) undefine(ctx context.Context, dom golibvirt.Domain) error {
	err := b.svc.DomainUndefineFlags(ctx, dom, undefineFlags)
	if hasCode(err, golibvirt.ErrInvalidArg) || hasCode(err, golibvirt.ErrNoSupport) {
		err = b.svc.DomainUndefineFlags(ctx, dom, 0)
	}
	if err != nil && !isNotFound(err) {
		return classify(errors.Wrap(err, errUndefineDomain))
	}
	return nil
}
