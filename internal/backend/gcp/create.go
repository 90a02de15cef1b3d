/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"
	"maps"
	"net/http"
	"strings"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"google.golang.org/protobuf/proto"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// Address statuses.
const (
	addressReserving = "RESERVING"
	addressInUse     = "IN_USE"
)

// addressWait bounds how long Create waits for a new address to be reserved.
const addressWait = 20 * time.Second

const (
	errFmtNotOurs        = "%s already exists but its ownership labels do not name this resource and provider instance: refusing to use it"
	errFmtFirewallNotOur = "firewall rule %s already exists but its description does not name this resource and provider instance: refusing to use it"
	errFmtNoUserAddress  = "address %s does not exist in region %s: spec.forProvider.address.name must name a reserved external address of the zone's region"
	errFmtForeignAddress = "spec.forProvider.address.name: address %s carries the ownership labels of another resource or provider instance: refusing to use it"
	// errFmtAddressNotListed: an address without ownership labels is the
	// platform's to hand out, through the provider config.
	errFmtAddressNotListed = "spec.forProvider.address.name %q is not in %s spec.policy.gcp.addresses, and carries no ownership labels of this resource"
	errFmtAddressUsed      = "spec.forProvider.address.name: address %s is used by another resource: refusing to use it"
	errFmtClaim            = "cannot label %s as this proxy's"
	errFmtClaiming         = "address %s is being labelled as this proxy's; trying again"
	errFmtInsert           = "cannot insert %s"
	errFmtPatch            = "cannot patch %s"
	errFmtReserving        = "address %s is still being reserved; the instance is created once it is"
)

// Create reserves the static address, inserts the firewall rule, then
// inserts the instance, and returns without waiting for the instance. Each
// step first reads what exists, so a Create that crashed half-way finishes
// the work; each insert carries a deterministic request ID (see insert).
// It waits (briefly) for a new address to be reserved, since the instance
// needs its IP, but never for the instance.
func (b *Backend) Create(ctx context.Context, d Desired) error {
	if err := b.life.acquire(); err != nil {
		return err
	}
	defer b.life.release()
	s, err := resolve(d)
	if err != nil {
		return err
	}
	// Observe reads this proxy's parts with GETs until lists made after
	// this write are there.
	defer b.cache.touch(s)
	if err := b.checkPolicy(s, d); err != nil {
		return err
	}
	ip, err := b.ensureAddress(ctx, s, d)
	if err != nil {
		return err
	}
	if err := b.ensureFirewall(ctx, s, d); err != nil {
		return err
	}
	if ip == "" {
		return nil
	}
	return b.ensureInstance(ctx, s, d, ip)
}

// ensureAddress returns the IP of the proxy's static address, reserving it
// when it is ours to reserve, or claiming a user-named one (see
// claimAddress); "" while it is still being reserved.
func (b *Backend) ensureAddress(ctx context.Context, s spec, d Desired) (string, error) {
	a, err := b.getAddress(ctx, s.region, s.addressName)
	if err != nil {
		return "", err
	}
	switch {
	case a == nil && s.userAddress:
		return "", backend.Permanent(errors.Errorf(errFmtNoUserAddress, s.addressName, s.region))
	case a == nil:
		return b.reserveAddress(ctx, s, d)
	}
	if err := b.checkAddress(s, a, d.Ownership); err != nil {
		return "", err
	}
	if !ownedBy(a.GetLabels(), d.Ownership) {
		if a, err = b.claimAddress(ctx, s, a, d.Ownership); err != nil {
			return "", err
		}
	}
	if a.GetStatus() == addressReserving {
		if a, err = b.waitReserved(ctx, s); err != nil || a == nil {
			return "", err
		}
	}
	return usableAddress(b.project, a, s)
}

// checkAddress returns a Permanent error unless the proxy may use the
// existing address a: one labelled as its own, or a user-named one without
// ownership labels that the provider config lists and no other resource
// uses (see claimable).
func (b *Backend) checkAddress(s spec, a *computepb.Address, o backend.Ownership) error {
	switch {
	case ownedBy(a.GetLabels(), o):
		return nil
	case s.userAddress && hasOwnershipLabels(a.GetLabels()):
		return backend.Permanent(errors.Errorf(errFmtForeignAddress, s.addressName))
	case !s.userAddress:
		return backend.Permanent(errors.Errorf(errFmtNotOurs, "address "+s.addressName))
	case !b.addressListed(s.addressName):
		return backend.Permanent(errors.Errorf(errFmtAddressNotListed, s.addressName, b.config))
	}
	_, err := usableAddress(b.project, a, s)
	return err
}

// claimable reports whether the proxy may claim a, an existing address it
// does not own yet: checkAddress without the errors.
func (b *Backend) claimable(s spec, a *computepb.Address, o backend.Ownership) bool {
	return !ownedBy(a.GetLabels(), o) && b.checkAddress(s, a, o) == nil
}

// claimAddress writes the proxy's ownership labels on a, a user-named
// address without ownership labels, before any instance uses it, and
// returns it as it then reads. From then on the address is this proxy's
// for every other resource and provider instance: while its VM runs, while
// the VM is replaced (the address is RESERVED, with its labels), and after
// the proxy is deleted, until the platform team removes the labels. Without
// the claim the address was free for anyone whenever no VM held it.
// setLabels sends the labelFingerprint read with a: of two proxies claiming
// at once, only the first writes, and the second then reads another's
// labels.
func (b *Backend) claimAddress(ctx context.Context, s spec, a *computepb.Address, o backend.Ownership) (*computepb.Address, error) {
	what := "address " + s.addressName
	labels := make(map[string]string, len(a.GetLabels())+5)
	maps.Copy(labels, a.GetLabels())
	maps.Copy(labels, ownershipLabels(o))
	fn := func(ctx context.Context, rid string) (*compute.Operation, error) {
		return b.svc.addresses.SetLabels(ctx, &computepb.SetLabelsAddressRequest{
			Project: b.project, Region: s.region, Resource: s.addressName, RequestId: proto.String(rid),
			RegionSetLabelsRequestResource: &computepb.RegionSetLabelsRequest{LabelFingerprint: proto.String(a.GetLabelFingerprint()), Labels: labels},
		})
	}
	// The request ID is the same for the same claim of the same labels: a
	// retry replays it.
	op, err := b.sendOp(ctx, fn, requestID(b.project, s.region, s.addressName, "addresses.setLabels", a.GetLabelFingerprint(), string(o.Owner.UID)))
	if err != nil && httpStatus(err) != http.StatusPreconditionFailed {
		return nil, errors.Wrapf(classifyMutation(err), errFmtClaim, what)
	}
	if err == nil {
		if err := operationError(what, op); err != nil {
			return nil, errors.Wrapf(err, errFmtClaim, what)
		}
	}
	// Read again whatever happened: the labels decide, not the operation.
	got, err := b.getAddress(ctx, s.region, s.addressName)
	switch {
	case err != nil:
		return nil, err
	case got == nil:
		return nil, backend.Permanent(errors.Errorf(errFmtNoUserAddress, s.addressName, s.region))
	case ownedBy(got.GetLabels(), o):
		return got, nil
	case hasOwnershipLabels(got.GetLabels()):
		return nil, backend.Permanent(errors.Errorf(errFmtForeignAddress, s.addressName))
	}
	return nil, backend.Transient(errors.Errorf(errFmtClaiming, s.addressName))
}

func (b *Backend) reserveAddress(ctx context.Context, s spec, d Desired) (string, error) {
	what := "address " + s.addressName
	fn := func(ctx context.Context, rid string) (*compute.Operation, error) {
		return b.svc.addresses.Insert(ctx, &computepb.InsertAddressRequest{
			Project: b.project, Region: s.region, AddressResource: buildAddress(s, d.Ownership), RequestId: proto.String(rid),
		})
	}
	// read is the address as insert's check of a done operation read it:
	// reserved already, it needs no second GET.
	var read *computepb.Address
	exists := func(ctx context.Context) (bool, error) {
		a, err := b.getAddress(ctx, s.region, s.addressName)
		read = a
		return a != nil, err
	}
	err := b.insert(ctx, what, fn, exists, b.project, s.region, s.addressName, "addresses.insert", epoch(b.now(), b.retry))
	if isAlreadyExists(err) {
		err, read = nil, nil // a concurrent reconcile won; its labels are checked below
	}
	if err != nil {
		return "", errors.Wrapf(classifyMutation(err), errFmtInsert, what)
	}
	a := read
	if a == nil || a.GetStatus() == addressReserving {
		if a, err = b.waitReserved(ctx, s); err != nil || a == nil {
			return "", err
		}
	}
	if !ownedBy(a.GetLabels(), d.Ownership) {
		return "", backend.Permanent(errors.Errorf(errFmtNotOurs, what))
	}
	return usableAddress(b.project, a, s)
}

// waitReserved reads the address until it is no longer being reserved, for
// at most addressWait. Reserving takes seconds; returning before it is done
// would leave the instance to a later reconcile, which the managed
// reconciler delays by up to its creation grace period (it takes the
// missing instance for one the API does not show yet).
func (b *Backend) waitReserved(ctx context.Context, s spec) (*computepb.Address, error) {
	ctx, cancel := context.WithTimeout(ctx, addressWait)
	defer cancel()
	for {
		a, err := b.getAddress(ctx, s.region, s.addressName)
		if err != nil || a == nil || a.GetStatus() != addressReserving {
			return a, err
		}
		select {
		case <-ctx.Done():
			return nil, backend.Transient(errors.Errorf(errFmtReserving, s.addressName))
		case <-time.After(time.Second):
		}
	}
}

// usableAddress returns the IP of a, or "" while it is being reserved. An
// address another resource uses cannot be the proxy's; the error does not
// say which resource, since that is another team's.
func usableAddress(project string, a *computepb.Address, s spec) (string, error) {
	if a.GetStatus() == addressReserving {
		return "", nil
	}
	if a.GetStatus() == addressInUse {
		ours := "/projects/" + project + "/zones/" + s.zone + "/instances/" + s.name
		for _, u := range a.GetUsers() {
			if !strings.HasSuffix(u, ours) {
				return "", backend.Permanent(errors.Errorf(errFmtAddressUsed, s.addressName))
			}
		}
	}
	return a.GetAddress(), nil
}

// ensureFirewall inserts the firewall rule, or resets one that drifted.
func (b *Backend) ensureFirewall(ctx context.Context, s spec, d Desired) error {
	want, err := buildFirewall(b.project, s, d.Proxy.AllowedClientCIDRs, d.Ownership)
	if err != nil {
		return err
	}
	what := "firewall rule " + s.name
	fw, err := b.getFirewall(ctx, s.name)
	if err != nil {
		return err
	}
	if fw == nil {
		fw, err = b.insertFirewall(ctx, s, want)
		if err != nil || fw == nil {
			return err
		}
	}
	if !firewallOwnedBy(fw.GetDescription(), d.Ownership) {
		return backend.Permanent(errors.Errorf(errFmtFirewallNotOur, s.name))
	}
	if len(firewallDiff(want, fw)) == 0 {
		return nil
	}
	// Patch is idempotent by nature, and a request ID would make a second
	// identical drift replay the first repair: none is sent.
	op, err := b.sendOp(ctx, func(ctx context.Context, _ string) (*compute.Operation, error) {
		return b.svc.firewalls.Patch(ctx, &computepb.PatchFirewallRequest{Project: b.project, Firewall: s.name, FirewallResource: want})
	}, "")
	if err != nil {
		return errors.Wrapf(classifyMutation(err), errFmtPatch, what)
	}
	return errors.Wrapf(operationError(what, op), errFmtPatch, what)
}

// insertFirewall inserts the rule and returns it as it now reads, or nil
// while its insert is pending.
func (b *Backend) insertFirewall(ctx context.Context, s spec, want *computepb.Firewall) (*computepb.Firewall, error) {
	what := "firewall rule " + s.name
	fn := func(ctx context.Context, rid string) (*compute.Operation, error) {
		return b.svc.firewalls.Insert(ctx, &computepb.InsertFirewallRequest{Project: b.project, FirewallResource: want, RequestId: proto.String(rid)})
	}
	// read is the rule as insert's check of a done operation read it: no
	// second GET for it.
	var read *computepb.Firewall
	exists := func(ctx context.Context) (bool, error) {
		fw, err := b.getFirewall(ctx, s.name)
		read = fw
		return fw != nil, err
	}
	err := b.insert(ctx, what, fn, exists, b.project, s.name, "firewalls.insert", epoch(b.now(), b.retry))
	if err != nil && !isAlreadyExists(err) {
		return nil, errors.Wrapf(classifyMutation(err), errFmtInsert, what)
	}
	if err == nil && read != nil {
		return read, nil
	}
	return b.getFirewall(ctx, s.name)
}

// ensureInstance inserts the instance with the static address ip, or adopts
// one of ours that already exists.
func (b *Backend) ensureInstance(ctx context.Context, s spec, d Desired, ip string) error {
	what := "instance " + s.name
	pc, err := renderConfig(b.verifier, d, nil)
	if err != nil {
		return err
	}
	md, err := buildMetadata(pc)
	if err != nil {
		return err
	}
	inst := buildInstance(b.project, s, d.Ownership, ip, md)
	fn := func(ctx context.Context, rid string) (*compute.Operation, error) {
		return b.svc.instances.Insert(ctx, &computepb.InsertInstanceRequest{Project: b.project, Zone: s.zone, InstanceResource: inst, RequestId: proto.String(rid)})
	}
	exists := func(ctx context.Context) (bool, error) {
		i, err := b.getInstance(ctx, s.zone, s.name)
		return i != nil, err
	}
	err = b.insert(ctx, what, fn, exists, b.project, s.zone, s.name, "instances.insert", instanceDigest(inst), epoch(b.now(), b.retry))
	if isAlreadyExists(err) {
		got, gerr := b.getInstance(ctx, s.zone, s.name)
		switch {
		case gerr != nil:
			return gerr
		case got != nil && !ownedBy(got.GetLabels(), d.Ownership):
			return backend.Permanent(errors.Errorf(errFmtNotOurs, what))
		}
		return nil
	}
	return errors.Wrapf(classifyMutation(err), errFmtInsert, what)
}
