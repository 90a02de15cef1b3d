/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gce

import (
	"context"
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
	errFmtAddressUsed    = "address %s (%s) is used by %s"
	errFmtInsert         = "cannot insert %s"
	errFmtPatch          = "cannot patch %s"
	errFmtReserving      = "address %s is still being reserved; the instance is created once it is"
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
	if err := b.checkServiceAccount(s); err != nil {
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
// when it is ours to reserve; "" while it is still being reserved.
func (b *Backend) ensureAddress(ctx context.Context, s spec, d Desired) (string, error) {
	what := "address " + s.addressName
	a, err := b.getAddress(ctx, s.region, s.addressName)
	if err != nil {
		return "", err
	}
	switch {
	case a == nil && s.userAddress:
		return "", backend.Permanent(errors.Errorf(errFmtNoUserAddress, s.addressName, s.region))
	case a == nil:
		return b.reserveAddress(ctx, s, d)
	case s.userAddress && !addressUsable(s, a, d.Ownership):
		return "", backend.Permanent(errors.Errorf(errFmtForeignAddress, s.addressName))
	case !addressUsable(s, a, d.Ownership):
		return "", backend.Permanent(errors.Errorf(errFmtNotOurs, what))
	case a.GetStatus() == addressReserving:
		if a, err = b.waitReserved(ctx, s); err != nil || a == nil {
			return "", err
		}
	}
	return usableAddress(b.project, a, s)
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

// addressUsable reports whether the proxy may use address a. One the
// provider reserved must carry the proxy's own ownership labels. A
// user-named one (spec.forProvider.address.name) may also carry no
// ownership label at all: one the platform team reserved. One that carries
// another owner's labels, or another provider instance's, is another
// proxy's egress IP (perhaps retained, or between two VMs while its VM is
// replaced): taking it would let one team send traffic from another team's
// allow-listed address.
func addressUsable(s spec, a *computepb.Address, o backend.Ownership) bool {
	if ownedBy(a.GetLabels(), o) {
		return true
	}
	return s.userAddress && !hasOwnershipLabels(a.GetLabels())
}

// usableAddress returns the IP of a, or "" while it is being reserved. An
// address another resource uses cannot be the proxy's.
func usableAddress(project string, a *computepb.Address, s spec) (string, error) {
	if a.GetStatus() == addressReserving {
		return "", nil
	}
	if a.GetStatus() == addressInUse {
		ours := "/projects/" + project + "/zones/" + s.zone + "/instances/" + s.name
		for _, u := range a.GetUsers() {
			if !strings.HasSuffix(u, ours) {
				return "", backend.Permanent(errors.Errorf(errFmtAddressUsed, s.addressName, a.GetAddress(), u))
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
