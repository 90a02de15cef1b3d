/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package libvirt

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

// Delete destroys and undefines d's domain, then deletes its overlay and
// seed volumes, so no orphan volume is left. It is idempotent and needs only
// d.Name and d.Ownership: the pool comes from the domain's metadata, else
// from d.Params.Pool, else every active pool is searched. A domain of
// another owner is a Permanent error and is left alone, with its volumes.
func (b *Backend) Delete(ctx context.Context, d Desired) error {
	if err := checkName(d.Name); err != nil {
		return err
	}
	var pools []string
	di, found, err := b.ownedDomain(ctx, d)
	if err != nil {
		return err
	}
	if found {
		if err := b.removeDomain(ctx, di.Dom); err != nil {
			return err
		}
		pools = append(pools, di.Meta.Pool)
	}
	if d.Params.Pool != "" && (len(pools) == 0 || pools[0] != d.Params.Pool) {
		pools = append(pools, d.Params.Pool)
	}
	handles, err := b.poolHandles(ctx, pools)
	if err != nil {
		return err
	}
	for _, p := range handles {
		for _, v := range []string{overlayName(d.Name), seedName(d.Name)} {
			if err := b.deleteVolume(ctx, p, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// poolHandles looks up the named pools, skipping missing ones; with no name
// it returns every active pool.
func (b *Backend) poolHandles(ctx context.Context, names []string) ([]golibvirt.StoragePool, error) {
	if len(names) == 0 {
		ps, err := b.svc.ConnectListAllStoragePools(ctx)
		return ps, classify(errors.Wrap(err, errListPools))
	}
	ps := make([]golibvirt.StoragePool, 0, len(names))
	for _, n := range names {
		p, err := b.lookupPool(ctx, n)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// removeDomain destroys (if running) and undefines a domain. The test
// driver refuses the NVRAM flag with ErrInvalidArg, and older drivers lack
// some flags (ErrNoSupport): then it undefines without flags.
func (b *Backend) removeDomain(ctx context.Context, dom golibvirt.Domain) error {
	err := b.svc.DomainDestroy(ctx, dom)
	if err != nil && !isNotFound(err) && !hasCode(err, golibvirt.ErrOperationInvalid) {
		return classify(errors.Wrap(err, errDestroyDomain))
	}
	err = b.svc.DomainUndefineFlags(ctx, dom, undefineFlags)
	if hasCode(err, golibvirt.ErrInvalidArg) || hasCode(err, golibvirt.ErrNoSupport) {
		err = b.svc.DomainUndefineFlags(ctx, dom, 0)
	}
	if err != nil && !isNotFound(err) {
		return classify(errors.Wrap(err, errUndefineDomain))
	}
	return nil
}
