/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gce

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

	msgFmtStatus    = "the VM is %s"
	msgWaitNatIP    = "the VM is running; waiting for its external IP"
	msgRunning      = "the VM is running; squid serves once its first boot installed it"
	msgFmtLeftovers = "the instance is gone but address %s remains"
)

// Observe reads the instance, its firewall rule and its address, and never
// changes them. It reports NotFound when the instance is missing, unless the
// firewall rule is gone while our address remains: Delete removes the
// firewall rule before the instance and the address after it, so that is a
// deletion half done (or a Create that crashed after reserving the
// address), reported as a Terminated instance so that Delete, or Update,
// finishes the work. A replaced instance keeps its firewall rule and
// address, so Observe reports it NotFound and Create makes it again.
func (b *Backend) Observe(ctx context.Context, d Desired) (Observation, error) {
	if err := b.life.acquire(); err != nil {
		return Observation{}, err
	}
	defer b.life.release()
	s, err := resolve(d)
	if err != nil {
		return Observation{}, err
	}
	p, err := b.getParts(ctx, s)
	if err != nil {
		return Observation{}, err
	}
	if p.instance == nil {
		return observeMissing(b.project, s, d, p)
	}
	if !ownedBy(p.instance.GetLabels(), d.Ownership) {
		return Observation{}, backend.Permanent(errors.Errorf(errFmtNotOurs, "instance "+s.name))
	}
	o, err := observe(b.project, s, d, p)
	if err != nil {
		return Observation{}, err
	}
	if err := b.checkServiceAccount(s); err != nil {
		// An instance made before its config stopped allowing the account:
		// Update reports why it cannot make the proxy match its spec.
		o.UpToDate, o.Diff = false, strings.TrimPrefix(o.Diff+"; "+err.Error(), "; ")
	}
	return o, nil
}

// observeMissing reports a proxy whose instance does not exist.
func observeMissing(project string, s spec, d Desired, p parts) (Observation, error) {
	if p.firewall != nil || p.address == nil || s.userAddress || s.retain || !ownedBy(p.address.GetLabels(), d.Ownership) {
		return Observation{}, backend.NotFound(errors.Errorf(errFmtNoInstance, s.name, s.zone))
	}
	msg := fmt.Sprintf(msgFmtLeftovers, s.addressName)
	return Observation{
		ID:      backend.FormatID(IDScheme, project, s.zone, s.name),
		State:   commonv1alpha1.StateTerminated,
		Message: msg,
		Diff:    msg,
		Extra:   v1alpha1.GCPProxyObservation{AddressName: s.addressName},
	}, nil
}

// observe reports an existing instance of ours.
func observe(project string, s spec, d Desired, p parts) (Observation, error) {
	inst := p.instance
	o := Observation{
		ID:             backend.FormatID(IDScheme, project, s.zone, s.name),
		ConfigChecksum: metadataValue(inst, MetadataConfigChecksum),
		Extra:          v1alpha1.GCPProxyObservation{InternalIP: internalIP(inst)},
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
	if o.State == commonv1alpha1.StateRunning {
		o.Ready, o.Message = o.Endpoint != "", msgRunning
		if !o.Ready {
			o.Message = msgWaitNatIP
		}
	}
	if p.address != nil {
		o.Extra.AddressName = s.addressName
	}
	if p.firewall != nil {
		o.Extra.FirewallName = s.name
	}
	diffs, err := proxyDiff(project, s, d, p)
	if err != nil {
		return Observation{}, err
	}
	o.UpToDate, o.Diff = len(diffs) == 0, strings.Join(diffs, "; ")
	return o, nil
}

// proxyDiff lists every way the parts differ from d.
func proxyDiff(project string, s spec, d Desired, p parts) ([]string, error) {
	conf, err := squid.Render(backend.SquidConfig(d.Proxy))
	if err != nil {
		return nil, backend.Permanent(errors.Wrap(err, errRender))
	}
	wantFW, err := buildFirewall(project, s, d.Proxy.AllowedClientCIDRs, d.Ownership)
	if err != nil {
		return nil, err
	}
	var diffs []string
	ip := ""
	switch {
	case p.address == nil:
		diffs = append(diffs, "address "+s.addressName+" is missing")
	case !addressUsable(s, p.address, d.Ownership):
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
	return append(diffs, instanceDiff(wanted(s, d, squid.Checksum(conf), ip), p.instance)...), nil
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
