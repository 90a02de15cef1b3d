/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/proto"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

const (
	errList           = "cannot list instances"
	errFmtListWarning = "cannot list instances: %s reports %s: %s"
	warningNoResults  = "NO_RESULTS_ON_PAGE"
	// A page of instances is decoded whole, with every instance's
	// metadata: see listPageSize.
	aggregatedPageSize = listPageSize
)

// Delete deletes the firewall rule, then (once the rule is gone) the
// instance, then (once the instance is gone) the address, unless the
// address is the user's (spec.forProvider.address.name) or
// retainAddressOnDelete is set. It goes on to the next step in the same
// call when a delete operation is already done, and otherwise returns
// without waiting; Observe reports the proxy gone only when all three are
// gone (see Observe). Parts that are not ours are never deleted.
//
// With only d.Name and d.Ownership set (the garbage collector), the zone is
// found by listing instances with the owner's label, and the address is
// kept: whether it was meant to be retained is not known.
func (b *Backend) Delete(ctx context.Context, d Desired) error {
	if err := b.life.acquire(); err != nil {
		return err
	}
	defer b.life.release()
	if err := checkName("instance name", d.Name); err != nil {
		return err
	}
	collecting := d.Params.Zone == ""
	var s spec
	if collecting {
		zone, err := b.findZone(ctx, d)
		if err != nil {
			return err
		}
		s = spec{name: d.Name, zone: zone, region: regionOf(zone)}
	} else {
		var err error
		if s, err = resolve(d); err != nil {
			return err
		}
	}
	defer b.cache.touch(s)
	fw, err := b.getFirewall(ctx, s.name)
	if err != nil {
		return err
	}
	if fw != nil && firewallOwnedBy(fw.GetDescription(), d.Ownership) {
		if gone, err := b.deleteFirewall(ctx, fw); err != nil || !gone {
			return err
		}
	}
	if s.zone == "" {
		return nil
	}
	inst, err := b.getInstance(ctx, s.zone, s.name)
	if err != nil {
		return err
	}
	if inst != nil {
		if !ownedBy(inst.GetLabels(), d.Ownership) {
			return backend.Permanent(errors.Errorf(errFmtNotOurs, "instance "+s.name))
		}
		if gone, err := b.deleteInstance(ctx, s.zone, inst); err != nil || !gone {
			return err
		}
	}
	if collecting || s.userAddress || s.retain {
		return nil
	}
	return b.deleteAddress(ctx, s, d)
}

func (b *Backend) deleteFirewall(ctx context.Context, fw *computepb.Firewall) (bool, error) {
	name := fw.GetName()
	what := "firewall rule " + name
	fn := func(ctx context.Context, rid string) (*compute.Operation, error) {
		return b.svc.firewalls.Delete(ctx, &computepb.DeleteFirewallRequest{Project: b.project, Firewall: name, RequestId: proto.String(rid)})
	}
	gone, err := b.remove(ctx, what, fn, b.project, name, "firewalls.delete", strconv.FormatUint(fw.GetId(), 10), epoch(b.now(), b.retry))
	return gone, errors.Wrapf(err, errFmtDelete, what)
}

func (b *Backend) deleteAddress(ctx context.Context, s spec, d Desired) error {
	a, err := b.getAddress(ctx, s.region, s.addressName)
	if err != nil || a == nil || !ownedBy(a.GetLabels(), d.Ownership) {
		return err
	}
	what := "address " + s.addressName
	fn := func(ctx context.Context, rid string) (*compute.Operation, error) {
		return b.svc.addresses.Delete(ctx, &computepb.DeleteAddressRequest{Project: b.project, Region: s.region, Address: s.addressName, RequestId: proto.String(rid)})
	}
	_, err = b.remove(ctx, what, fn, b.project, s.region, s.addressName, "addresses.delete", strconv.FormatUint(a.GetId(), 10), epoch(b.now(), b.retry))
	return errors.Wrapf(err, errFmtDelete, what)
}

// findZone returns the zone of d's instance, or "" when there is none.
func (b *Backend) findZone(ctx context.Context, d Desired) (string, error) {
	filter := fmt.Sprintf("labels.%s = %q", backend.CloudLabelKeys.OwnerUID, backend.LabelValue(string(d.Ownership.Owner.UID)))
	zone := ""
	err := b.aggregated(ctx, filter, func(z string, inst *computepb.Instance) {
		if inst.GetName() == d.Name {
			zone = z
		}
	})
	return zone, err
}

// List returns every instance with the managed-by label in the project. A
// zone the listing could not reach fails the whole List.
func (b *Backend) List(ctx context.Context) ([]backend.Instance, error) {
	if err := b.life.acquire(); err != nil {
		return nil, err
	}
	defer b.life.release()
	var out []backend.Instance
	filter := fmt.Sprintf("labels.%s = %q", backend.CloudLabelKeys.ManagedBy, backend.ManagedByValue)
	err := b.aggregated(ctx, filter, func(zone string, inst *computepb.Instance) {
		o, ok := backend.OwnershipFromLabels(backend.CloudLabelKeys, inst.GetLabels())
		if !ok {
			return
		}
		in := backend.Instance{ID: backend.FormatID(IDScheme, b.project, zone, inst.GetName()), Name: inst.GetName(), Ownership: o}
		in.State, _ = instanceState(inst.GetStatus())
		if t, err := time.Parse(time.RFC3339, inst.GetCreationTimestamp()); err == nil {
			in.CreatedAt = t
		}
		out = append(out, in)
	})
	return out, err
}

// aggregated calls fn for every instance matching filter, in every zone.
func (b *Backend) aggregated(ctx context.Context, filter string, fn func(zone string, inst *computepb.Instance)) error {
	ctx, cancel := b.call(ctx)
	defer cancel()
	it := b.svc.instances.AggregatedList(ctx, &computepb.AggregatedListInstancesRequest{
		Project: b.project, Filter: proto.String(filter), MaxResults: proto.Uint32(aggregatedPageSize),
	})
	for {
		pair, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return errors.Wrap(classify(err), errList)
		}
		if w := pair.Value.GetWarning(); w != nil && w.GetCode() != warningNoResults {
			return backend.Transient(errors.Errorf(errFmtListWarning, pair.Key, w.GetCode(), w.GetMessage()))
		}
		zone := strings.TrimPrefix(pair.Key, "zones/")
		for _, inst := range pair.Value.GetInstances() {
			fn(zone, inst)
		}
	}
}
