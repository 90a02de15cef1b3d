/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

const (
	errListDomains = "cannot list the domains"
)

// List returns every domain whose metadata marks it as this provider's,
// with the ownership it records; backend.Collectable then keeps only this
// provider instance's. Nothing else is listed: a volume is ours only through
// the domain that claims it, so volumes without such a domain are never
// collected, whatever their names. List fails as a whole rather than
// return a partial list.
func (b *Backend) List(ctx context.Context) ([]backend.Instance, error) {
	doms, err := b.svc.ConnectListAllDomains(ctx)
	if err != nil {
		return nil, classify(errors.Wrap(err, errListDomains))
	}
	var out []backend.Instance
	for _, dom := range doms {
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
	return out, nil
}
