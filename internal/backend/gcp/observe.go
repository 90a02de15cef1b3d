/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

const (
	errFmtNoInstance = "instance %s does not exist in zone %s"

	msgFmtStatus   = "the VM is %s"
	msgWaitNatIP   = "the VM is running; waiting for its external IP"
	msgFmtHalfMade = "the instance is missing; %s %s"
	msgFmtServes   = "the guest serves configuration %.12s, want %.12s"
)

// Observe reads the instance, its firewall rule and its address (from the
// shared lists, see partsCache), and the guest's report, and never changes
// them. It reports NotFound only when the instance is missing and
// no part of ours is left (see observeMissing).
func (b *Backend) Observe(ctx context.Context, d Desired) (Observation, error) {
	if err := b.life.acquire(); err != nil {
		return Observation{}, err
	}
	defer b.life.release()
	s, err := resolve(d)
	if err != nil {
		return Observation{}, err
	}
	p, err := b.cachedParts(ctx, s, d.Ownership)
	if err != nil {
		return Observation{}, err
	}
	if p.instance == nil {
		return observeMissing(b.project, s, d, p)
	}
	if !ownedBy(p.instance.GetLabels(), d.Ownership) {
		return Observation{}, backend.Permanent(errors.Errorf(errFmtNotOurs, "instance "+s.name))
	}
	o, err := b.observe(s, d, p)
	if err != nil {
		return Observation{}, err
	}
	if o.State == commonv1alpha1.StateRunning && o.Endpoint != "" {
		// Only a running VM with an address can serve: a stopped one is
		// replaced whatever its guest last said.
		ga, err := b.guestAttributes(ctx, s)
		if err != nil {
			return Observation{}, err
		}
		sum, err := b.desiredChecksum(d)
		if err != nil {
			return Observation{}, err
		}
		g := guestReady(ga[GuestAttributePath], sum, natIP(p.instance), b.now())
		o.Ready, o.Message, o.ConfigChecksum = g.ready, g.msg, g.served
		// The metadata may be current already while the guest applies it.
		var pending []string
		if g.ready && g.served != sum {
			pending = append(pending, fmt.Sprintf(msgFmtServes, g.served, sum))
		}
		if d := applyDiff(ga[GuestApplyPath], AppliedConfig(sum, metadataValue(p.instance, MetadataHtpasswd))); d != "" && o.UpToDate {
			pending = append(pending, d)
		}
		if len(pending) > 0 {
			o.UpToDate = false
			o.Diff = strings.TrimPrefix(o.Diff+"; "+strings.Join(pending, "; "), "; ")
		}
		if t, ok := squid.ParseTraffic(ga[GuestTrafficPath]); ok && g.ready {
			o.Traffic, o.TrafficAt = &t, g.at
		}
	}
	// The policy is not Observe's: the provider refuses a resource that
	// breaks it before it observes (docs/backends.md, "Policy").
	return o, nil
}

// observeMissing reports a proxy whose instance does not exist. It is
// NotFound only when no other part of ours is left either: the firewall
// rule, or the address when the proxy reserved it and deletes it with the
// instance (a user-named or retained address outlives the proxy, so it
// does not count). Otherwise the proxy is half made (Create inserts the
// address, then the firewall rule, then the instance, and may crash or hit
// a quota in between; Update deletes a stopped instance to replace it) or
// half deleted (Delete removes the firewall rule, then the instance, then
// the address). Reporting NotFound then would let the reconciler drop its
// finalizer without calling Delete, and the garbage collector lists
// instances only: the parts would leak. So it is reported Pending and not
// up to date: Update makes the instance (it does not replace anything),
// and Delete, on deletion, removes what is left.
func observeMissing(project string, s spec, d Desired, p parts) (Observation, error) {
	var left []string
	if p.firewall != nil && firewallOwnedBy(p.firewall.GetDescription(), d.Ownership) {
		left = append(left, "firewall rule "+s.name)
	}
	ownAddress := p.address != nil && ownedBy(p.address.GetLabels(), d.Ownership)
	if ownAddress && !s.userAddress && !s.retain {
		left = append(left, "address "+s.addressName)
	}
	if len(left) == 0 {
		return Observation{}, backend.NotFound(errors.Errorf(errFmtNoInstance, s.name, s.zone))
	}
	verb := "exists"
	if len(left) > 1 {
		verb = "exist"
	}
	msg := fmt.Sprintf(msgFmtHalfMade, strings.Join(left, " and "), verb)
	o := Observation{
		ID:      backend.FormatID(IDScheme, project, s.zone, s.name),
		State:   commonv1alpha1.StatePending,
		Message: msg,
		Diff:    msg,
	}
	if ownAddress {
		o.Ownership, _ = backend.OwnershipFromLabels(backend.CloudLabelKeys, p.address.GetLabels())
	}
	if p.address != nil {
		o.Extra.AddressName = s.addressName
	}
	if p.firewall != nil {
		o.Extra.FirewallName = s.name
	}
	return o, nil
}

// observe reports an existing instance of ours.
func (b *Backend) observe(s spec, d Desired, p parts) (Observation, error) {
	project, inst := b.project, p.instance
	// ConfigChecksum is what the guest reports it serves (see Observe).
	o := Observation{
		ID:    backend.FormatID(IDScheme, project, s.zone, s.name),
		Extra: v1alpha1.GCPProxyObservation{InternalIP: internalIP(inst)},
	}
	o.Ownership, _ = backend.OwnershipFromLabels(backend.CloudLabelKeys, inst.GetLabels())
	if t, err := time.Parse(time.RFC3339, inst.GetCreationTimestamp()); err == nil {
		o.CreatedAt = t
	}
	o.State, o.Message = instanceState(inst.GetStatus())
	if ip := natIP(inst); ip != "" {
		o.EgressIPs = []string{ip}
		o.Endpoint = net.JoinHostPort(ip, strconv.Itoa(int(s.port)))
	}
	if o.State == commonv1alpha1.StateRunning && o.Endpoint == "" {
		o.Message = msgWaitNatIP
	}
	if p.address != nil {
		o.Extra.AddressName = s.addressName
	}
	if p.firewall != nil {
		o.Extra.FirewallName = s.name
	}
	diffs, err := b.proxyDiff(s, d, p)
	if err != nil {
		return Observation{}, err
	}
	o.UpToDate, o.Diff = len(diffs) == 0, strings.Join(diffs, "; ")
	return o, nil
}

// desiredChecksum is the checksum of the squid configuration d asks for,
// rendered only when its parameters are new (squid.Sums).
func (b *Backend) desiredChecksum(d Desired) (string, error) {
	sum, err := b.sums.Sum(vmSquidConfig(d))
	if err != nil {
		return "", backend.Permanent(errors.Wrap(err, errRender))
	}
	return sum, nil
}

// proxyDiff lists every way the parts differ from d.
func (b *Backend) proxyDiff(s spec, d Desired, p parts) ([]string, error) {
	sum, err := b.desiredChecksum(d)
	if err != nil {
		return nil, err
	}
	wantFW, err := buildFirewall(b.project, s, d.Proxy.AllowedClientCIDRs, d.Ownership)
	if err != nil {
		return nil, err
	}
	var diffs []string
	ip := ""
	switch {
	case p.address == nil:
		diffs = append(diffs, "address "+s.addressName+" is missing")
	case b.claimable(s, p.address, d.Ownership):
		// Attached before the provider claimed addresses: Update labels it.
		diffs = append(diffs, "address "+s.addressName+" is not labelled as this proxy's yet")
		ip = p.address.GetAddress()
	case !ownedBy(p.address.GetLabels(), d.Ownership):
		diffs = append(diffs, "address "+s.addressName+" is not ours")
	default:
		ip = p.address.GetAddress()
	}
	switch {
	case p.firewall == nil:
		diffs = append(diffs, "firewall rule "+s.name+" is missing")
	case !firewallOwnedBy(p.firewall.GetDescription(), d.Ownership):
		diffs = append(diffs, "firewall rule "+s.name+" is not ours")
	default:
		diffs = append(diffs, firewallDiff(wantFW, p.firewall)...)
	}
	return append(diffs, instanceDiff(b.verifier, wanted(s, d, sum, ip), p.instance)...), nil
}

// instanceState maps an instance status to a state and a message.
func instanceState(status string) (commonv1alpha1.InstanceState, string) {
	msg := fmt.Sprintf(msgFmtStatus, status)
	switch status {
	case "PROVISIONING", "STAGING", "REPAIRING":
		return commonv1alpha1.StatePending, msg
	case "RUNNING":
		return commonv1alpha1.StateRunning, msg
	case "STOPPING", "STOPPED", "SUSPENDING", "SUSPENDED":
		return commonv1alpha1.StateStopped, msg
	case "TERMINATED":
		return commonv1alpha1.StateTerminated, msg
	}
	return commonv1alpha1.StateUnknown, msg
}
