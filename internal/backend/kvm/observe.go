/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

const (
	errLookupDomain   = "cannot look up the domain"
	errDomainState    = "cannot read the domain's state"
	errDomainXML      = "cannot read the domain's XML"
	errParseDomainXML = "cannot parse the domain's XML"
	errAddresses      = "cannot read the domain's addresses"
	errFmtNotOurs     = "domain %s exists but its metadata does not say it belongs to this resource and provider instance: refusing to touch it"
	errFmtNoInstance  = "domain %s does not exist"

	msgWaitLease   = "running; waiting for a DHCP lease of the VM's MAC"
	msgWaitAgent   = "running; waiting for the guest agent to report an address"
	msgInterrupted = "creating the domain was interrupted before its disks were attached"
)

// domainInfo is a domain as the backend reads it back.
type domainInfo struct {
	Dom   golibvirt.Domain
	XML   *libvirtxml.Domain
	Meta  metadata
	Ours  bool
	State domainState
}

// inspect reads a domain's state, XML and metadata.
func (b *Backend) inspect(ctx context.Context, dom golibvirt.Domain) (domainInfo, error) {
	st, err := b.svc.DomainGetState(ctx, dom)
	if err != nil {
		return domainInfo{}, classify(errors.Wrap(err, errDomainState))
	}
	desc, err := b.svc.DomainGetXMLDesc(ctx, dom)
	if err != nil {
		return domainInfo{}, classify(errors.Wrap(err, errDomainXML))
	}
	x := &libvirtxml.Domain{}
	if err := x.Unmarshal(desc); err != nil {
		return domainInfo{}, errors.Wrap(err, errParseDomainXML)
	}
	di := domainInfo{Dom: dom, XML: x, State: st}
	if x.Metadata != nil {
		di.Meta, di.Ours, err = parseMetadata(x.Metadata.XML)
		if err != nil {
			return domainInfo{}, err
		}
	}
	return di, nil
}

// ownedDomain looks up d's domain and checks it is d's. found is false when
// there is none; a domain of another owner is a Permanent error.
func (b *Backend) ownedDomain(ctx context.Context, d Desired) (domainInfo, bool, error) {
	dom, err := b.svc.DomainLookupByName(ctx, d.Name)
	if isNotFound(err) {
		return domainInfo{}, false, nil
	}
	if err != nil {
		return domainInfo{}, false, classify(errors.Wrap(err, errLookupDomain))
	}
	di, err := b.inspect(ctx, dom)
	if isNotFound(err) {
		return domainInfo{}, false, nil
	}
	if err != nil {
		return domainInfo{}, false, err
	}
	if !di.Ours || !di.Meta.ownedBy(d.Ownership) {
		return domainInfo{}, false, backend.Permanent(errors.Errorf(errFmtNotOurs, d.Name))
	}
	return di, true, nil
}

// complete reports whether Create finished defining the domain: its claim
// has no disk.
func (di domainInfo) complete() bool {
	if di.XML == nil || di.XML.Devices == nil {
		return false
	}
	for _, dk := range di.XML.Devices.Disks {
		if dk.Target != nil && dk.Target.Dev == diskTarget {
			return true
		}
	}
	return false
}

// Observe reports the instance. It is NotFound once the domain is gone:
// Delete removes the domain last, so its volumes are gone by then, and
// volumes without our domain are not ours to report.
func (b *Backend) Observe(ctx context.Context, d Desired) (Observation, error) {
	if err := checkDesired(d); err != nil {
		return Observation{}, err
	}
	// The policy is not Observe's: the provider refuses a resource that
	// breaks it before it observes (docs/backends.md, "Policy"), but for
	// one being deleted, which Observe must still find.
	if d.Params.UserDataSecretRef != nil && !b.policy.allowsUserData() {
		// Never read what the policy refuses to run.
		d.Params.UserDataSecretRef = nil
	}
	if o, ok, err := b.observeVerified(ctx, d); ok {
		return o, err
	}
	return b.observe(ctx, d)
}

// observe is the full read of Observe.
func (b *Backend) observe(ctx context.Context, d Desired) (Observation, error) {
	o, _, err := b.read(ctx, d)
	return o, err
}

// readout is what a full read found, for Update.
type readout struct {
	di   domainInfo
	diff vmDiff
}

// live reports whether the running guest can take what differs: nothing
// but the configuration and credentials, the rendered configuration (not
// the user's own user-data) then and now, and a guest with the apply
// program.
func (r readout) live(d Desired) bool {
	return len(r.diff.replace) == 0 && len(r.diff.live) > 0 && d.Params.UserDataSecretRef == nil && r.di.Meta.Guest == guestVersion
}

// read is the full read of Observe; the readout is set when the domain is
// complete.
func (b *Backend) read(ctx context.Context, d Desired) (Observation, readout, error) {
	p := withDefaults(d.Params)
	di, found, err := b.ownedDomain(ctx, d)
	if err != nil {
		return Observation{}, readout{}, err
	}
	if !found {
		return Observation{}, readout{}, backend.NotFound(errors.Errorf(errFmtNoInstance, d.Name))
	}
	mac := MACAddress(d.Ownership.Owner.UID)
	o := Observation{
		ID:             FormatInstanceID(di.Meta.Pool, d.Name),
		CreatedAt:      di.Meta.CreatedAt,
		Ownership:      di.Meta.Ownership,
		ConfigChecksum: di.Meta.ConfigChecksum,
	}
	o.State, o.Message = instanceState(di.State)
	if !di.complete() {
		// Update finishes what Create began; nothing to replace yet.
		o.State, o.Message, o.Diff = commonv1alpha1.StatePending, msgInterrupted, msgInterrupted
		return o, readout{}, nil
	}
	vm := vmFromXML(di.XML)
	vm.ConfigChecksum, vm.Htpasswd = di.Meta.ConfigChecksum, di.Meta.Htpasswd
	o.Extra.MACAddress = vm.MAC
	if vm.OverlayBytes, vm.Missing, err = b.volumes(ctx, di.Meta.Pool, d.Name); err != nil {
		return Observation{}, readout{}, err
	}
	sum, err := b.configChecksum(ctx, d)
	if err != nil {
		return Observation{}, readout{}, err
	}
	want := wanted(p, mac, sum)
	if d.Params.UserDataSecretRef == nil && d.Credentials.Username != "" {
		want.CredentialsMatch = func(h string) bool {
			return b.verifier.HtpasswdMatches([]byte(h), d.Credentials.Username, d.Credentials.Password)
		}
	}
	r := readout{di: di, diff: diff(want, vm)}
	diffs := r.diff.all()
	if neverStarted(di.State) {
		// Not up to date, so that the reconciler calls Update, which starts
		// it when nothing else differs.
		diffs = append(diffs, msgNeverStarted)
	}
	o.UpToDate, o.Diff = len(diffs) == 0, strings.Join(diffs, "; ")
	b.remember(d, di, desiredKey(d, sum), o)
	if o.State != commonv1alpha1.StateRunning {
		return o, r, nil
	}
	// The configuration the guest serves, not the desired one: Ready stays
	// True while a change is applied, and UpToDate says whether it is.
	if err := b.reachable(ctx, &o, di.Dom, d, vm.MAC, di.Meta.ConfigChecksum); err != nil {
		return Observation{}, readout{}, err
	}
	return o, r, nil
}

// reachable fills in o what every Observe of a running domain reads anew:
// its address, and with the serve probe whether squid serves the
// configuration whose checksum is sum, and its traffic.
func (b *Backend) reachable(ctx context.Context, o *Observation, dom golibvirt.Domain, d Desired, mac, sum string) error {
	ip, msg, err := b.address(ctx, domainInfo{Dom: dom}, mac, withDefaults(d.Params).Network.Bridge != nil)
	if err != nil {
		return err
	}
	if ip == "" {
		o.Message = msg
		return nil
	}
	// On a NAT network the VM's address is private: traffic leaves from the
	// host's address. Only a bridged VM's address is its real egress IP.
	o.Ready, o.Endpoint, o.EgressIPs = true, net.JoinHostPort(ip, strconv.Itoa(int(port(d.Proxy)))), []string{ip}
	if b.probe {
		o.Ready, o.Message, o.Traffic, err = b.serves(ctx, dom, d, ip, sum)
		if o.Traffic != nil {
			o.TrafficAt = b.now()
		}
	}
	return err
}

func port(p commonv1alpha1.ProxyParameters) int32 {
	if p.Port == 0 {
		return backend.DefaultPort
	}
	return p.Port
}

// volumes returns the overlay's capacity and the names of missing volumes.
// A missing pool means every volume is missing.
func (b *Backend) volumes(ctx context.Context, pool, name string) (uint64, []string, error) {
	all := []string{overlayName(name), seedName(name)}
	p, err := b.svc.StoragePoolLookupByName(ctx, pool)
	if isNotFound(err) {
		return 0, all, nil
	}
	if err != nil {
		return 0, nil, classify(errors.Wrapf(err, errFmtLookupPool, pool))
	}
	var missing []string
	var capacity uint64
	for _, v := range all {
		if v == seedName(name) {
			// Only whether the seed exists matters: one RPC, not two.
			_, err := b.svc.StorageVolLookupByName(ctx, p, v)
			switch {
			case isNotFound(err):
				missing = append(missing, v)
			case err != nil:
				return 0, nil, classify(errors.Wrapf(err, errFmtLookupVolume, v))
			}
			continue
		}
		x, err := b.volumeXML(ctx, p, v)
		if isNotFound(err) {
			missing = append(missing, v)
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		if v == overlayName(name) && x.Capacity != nil {
			capacity = toBytes(x.Capacity)
		}
	}
	return capacity, missing, nil
}

// address finds the VM's IPv4 address for its MAC: from the guest agent,
// else from the network's DHCP leases. The agent first: a replaced VM keeps
// its name and MAC but its DHCP client ID is new, so the network's leases
// still list the old VM's address, first, until they expire. On a bridge
// only the agent knows it. libvirt errors (no agent, 86) only mean "no
// address yet".
func (b *Backend) address(ctx context.Context, di domainInfo, mac string, bridged bool) (string, string, error) {
	sources := []golibvirt.DomainInterfaceAddressesSource{golibvirt.DomainInterfaceAddressesSrcAgent, golibvirt.DomainInterfaceAddressesSrcLease}
	msg := msgWaitLease
	if bridged {
		sources, msg = sources[:1], msgWaitAgent
	}
	for _, src := range sources {
		ifaces, err := b.svc.DomainInterfaceAddresses(ctx, di.Dom, src)
		var le golibvirt.Error
		if err != nil && !errors.As(err, &le) {
			return "", "", classify(errors.Wrap(err, errAddresses))
		}
		if ip := pickAddress(ifaces, mac); ip != "" {
			return ip, "", nil
		}
	}
	return "", msg, nil
}

// pickAddress returns the first global unicast IPv4 address of the NIC with
// mac; the guest agent also lists loopback and other NICs.
func pickAddress(ifaces []golibvirt.DomainInterface, mac string) string {
	for _, i := range ifaces {
		if len(i.Hwaddr) > 0 && !strings.EqualFold(i.Hwaddr[0], mac) {
			continue
		}
		for _, a := range i.Addrs {
			ip, err := netip.ParseAddr(a.Addr)
			if err == nil && ip.Is4() && ip.IsGlobalUnicast() {
				return ip.String()
			}
		}
	}
	return ""
}

// Update makes the instance match d. A change of the squid configuration
// or of the credentials alone is applied to the running guest (applyLive):
// no reboot, no dropped connection. Anything else replaces the VM: a
// stopped, crashed or out-of-date VM is deleted, volumes and all, and the
// next Observe reports NotFound so the reconciler creates it afresh with
// the same name and MAC. The VM holds no state, and a new seed needs a
// fresh overlay anyway (cloud-init runs once per instance). So do a change
// of the user's own user-data, and a change on a VM made before its guest
// could apply one. A proxy the policy refuses is left as it is. A paused
// but up-to-date VM is left alone, a domain whose Create was interrupted is
// finished by Create, and an up-to-date domain that was never started
// (neverStarted) is started.
func (b *Backend) Update(ctx context.Context, d Desired) error {
	if err := checkDesired(d); err != nil {
		return err
	}
	if err := b.policy.check(d.Params); err != nil {
		return err
	}
	b.verified.forget(d.Name)
	defer b.verified.forget(d.Name)
	di, found, err := b.ownedDomain(ctx, d)
	if err != nil {
		return err
	}
	if found && !di.complete() {
		return b.Create(ctx, d)
	}
	o, r, err := b.read(ctx, d)
	if backend.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	switch o.State {
	case commonv1alpha1.StateRunning, commonv1alpha1.StatePending, commonv1alpha1.StateUnknown:
		if o.UpToDate {
			return nil
		}
		if o.Diff == msgNeverStarted {
			return b.start(ctx, di.Dom)
		}
		if o.State == commonv1alpha1.StateRunning && r.live(d) {
			return b.applyLive(ctx, d, r.di)
		}
	case commonv1alpha1.StateStopped, commonv1alpha1.StateTerminated:
	}
	return b.Delete(ctx, d)
}
