/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

const (
	errFmtGetInstance = "cannot get instance %s in zone %s"
	errFmtGetAddress  = "cannot get address %s in region %s"
	errFmtGetFirewall = "cannot get firewall rule %s"
)

// parts are the cloud resources a proxy is made of, as they are now; a nil
// part does not exist.
type parts struct {
	instance *computepb.Instance
	address  *computepb.Address
	firewall *computepb.Firewall
}

// getInstance returns the instance, or nil when there is none.
func (b *Backend) getInstance(ctx context.Context, zone, name string) (*computepb.Instance, error) {
	ctx, cancel := b.call(ctx)
	defer cancel()
	inst, err := b.svc.instances.Get(ctx, &computepb.GetInstanceRequest{Project: b.project, Zone: zone, Instance: name})
	if isNotFound(err) {
		return nil, nil
	}
	return inst, errors.Wrapf(classify(err), errFmtGetInstance, name, zone)
}

// getAddress returns the address, or nil when there is none.
func (b *Backend) getAddress(ctx context.Context, region, name string) (*computepb.Address, error) {
	ctx, cancel := b.call(ctx)
	defer cancel()
	a, err := b.svc.addresses.Get(ctx, &computepb.GetAddressRequest{Project: b.project, Region: region, Address: name})
	if isNotFound(err) {
		return nil, nil
	}
	return a, errors.Wrapf(classify(err), errFmtGetAddress, name, region)
}

// getFirewall returns the firewall rule, or nil when there is none.
func (b *Backend) getFirewall(ctx context.Context, name string) (*computepb.Firewall, error) {
	ctx, cancel := b.call(ctx)
	defer cancel()
	fw, err := b.svc.firewalls.Get(ctx, &computepb.GetFirewallRequest{Project: b.project, Firewall: name})
	if isNotFound(err) {
		return nil, nil
	}
	return fw, errors.Wrapf(classify(err), errFmtGetFirewall, name)
}

// getParts reads all three parts of the proxy s describes.
func (b *Backend) getParts(ctx context.Context, s spec) (parts, error) {
	var p parts
	var err error
	if p.instance, err = b.getInstance(ctx, s.zone, s.name); err != nil {
		return parts{}, err
	}
	if p.firewall, err = b.getFirewall(ctx, s.name); err != nil {
		return parts{}, err
	}
	if p.address, err = b.getAddress(ctx, s.region, s.addressName); err != nil {
		return parts{}, err
	}
	return p, nil
}
