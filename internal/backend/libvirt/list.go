/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package libvirt

import (
	"context"
	"sort"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

const (
	errListDomains = "cannot list the domains"
	errFmtListVols = "cannot list the volumes of pool %s"
)

// List returns every domain whose metadata marks it as this provider's,
// and every orphan: volumes named like an instance's (egp-*.qcow2,
// egp-*-seed.iso) in an active pool, with no domain of that name. An orphan
// has no ownership (volumes carry no metadata), State Terminated, and as
// CreatedAt the newest change time of its volumes (zero when the pool does
// not report one, so it is never collected by age). backend.Collectable
// never collects it; a collector may delete it with Delete(Desired{Name,
// Params.Pool}) from its ID once it is old enough, since no domain uses it.
// List fails as a whole rather than return a partial list.
func (b *Backend) List(ctx context.Context) ([]backend.Instance, error) {
	doms, err := b.svc.ConnectListAllDomains(ctx)
	if err != nil {
		return nil, classify(errors.Wrap(err, errListDomains))
	}
	names := make(map[string]bool, len(doms))
	var out []backend.Instance
	for _, dom := range doms {
		names[dom.Name] = true
		di, err := b.inspect(ctx, dom)
		if isNotFound(err) {
			// Deleted since it was listed.
			continue
		}
		if err != nil {
			return nil, err
		}
		if !di.Ours {
			continue
		}
		state, _ := instanceState(di.State)
		out = append(out, backend.Instance{
			ID:        FormatInstanceID(di.Meta.Pool, dom.Name),
			Name:      dom.Name,
			Ownership: di.Meta.Ownership,
			CreatedAt: di.Meta.CreatedAt,
			State:     state,
		})
	}
	orphans, err := b.orphans(ctx, names)
	if err != nil {
		return nil, err
	}
	return append(out, orphans...), nil
}

// orphans finds volumes named like an instance's whose domain is not in
// domains.
func (b *Backend) orphans(ctx context.Context, domains map[string]bool) ([]backend.Instance, error) {
	pools, err := b.svc.ConnectListAllStoragePools(ctx)
	if err != nil {
		return nil, classify(errors.Wrap(err, errListPools))
	}
	var out []backend.Instance
	for _, p := range pools {
		found, err := b.poolOrphans(ctx, p, domains)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

func (b *Backend) poolOrphans(ctx context.Context, p golibvirt.StoragePool, domains map[string]bool) ([]backend.Instance, error) {
	vols, err := b.svc.StoragePoolListAllVolumes(ctx, p)
	if err != nil {
		return nil, classify(errors.Wrapf(err, errFmtListVols, p.Name))
	}
	changed := map[string]time.Time{}
	for _, v := range vols {
		name, ok := instanceOfVolume(v.Name)
		if !ok || domains[name] {
			continue
		}
		x, err := b.volumeXML(ctx, p, v.Name)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		t := changeTime(x.Target)
		if cur, seen := changed[name]; !seen || t.After(cur) {
			changed[name] = t
		}
	}
	out := make([]backend.Instance, 0, len(changed))
	for name, t := range changed {
		out = append(out, backend.Instance{
			ID:        FormatInstanceID(p.Name, name),
			Name:      name,
			CreatedAt: t,
			State:     commonv1alpha1.StateTerminated,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
