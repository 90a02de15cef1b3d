/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

// DefaultVerifyInterval is how long a steady-state Observe trusts what it
// last verified of a running, up-to-date domain: its XML, its volumes and
// their sizes. Only an operator changes them behind the provider's back
// (virsh edit, vol-delete), and such drift is seen within this.
const DefaultVerifyInterval = 10 * time.Minute

// A steady-state Observe of a domain verified less than the verify interval
// ago, for the same desired state, makes two RPCs instead of eight: the
// domain's state, through the handle it verified (a domain deleted or
// replaced since has another UUID, so this fails), and the address, as
// every Observe reads it (or the serve probe). A state other than the
// verified one, an error, a changed spec or user-data, or a Create, Update
// or Delete of the proxy sends it back to the full read. The memory is the
// Backend's, per provider config, and empty after a restart.

// verifiedDomain is what a full Observe found of a running, up-to-date
// domain.
type verifiedDomain struct {
	dom golibvirt.Domain
	st  domainState
	// key digests the desired state it was verified against.
	key string
	o   Observation
	at  time.Time
}

type verifiedDomains struct {
	mu sync.Mutex
	m  map[string]verifiedDomain
}

func (v *verifiedDomains) get(name string) (verifiedDomain, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.m[name]
	return e, ok
}

func (v *verifiedDomains) put(name string, e verifiedDomain) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[string]verifiedDomain{}
	}
	v.m[name] = e
}

func (v *verifiedDomains) forget(name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, name)
}

// desiredKey digests everything a full Observe compares d with, sum being
// the configuration checksum it computed (which covers the user's
// user-data). The digest, not d, is kept: d holds the proxy's password.
func desiredKey(d Desired, sum string) string {
	b, err := json.Marshal(struct {
		D   Desired
		Sum string
	}{d, sum})
	if err != nil {
		return "" // never matches: the full read
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// observeVerified answers Observe from what was verified of d's domain, and
// reports false when a full read is needed.
func (b *Backend) observeVerified(ctx context.Context, d Desired) (Observation, bool, error) {
	if b.verifyEvery <= 0 {
		return Observation{}, false, nil
	}
	e, ok := b.verified.get(d.Name)
	if !ok {
		return Observation{}, false, nil
	}
	// The checksum covers the user's user-data; failing to read it is
	// reported by the full read, in its order.
	sum, err := b.configChecksum(ctx, d)
	if err != nil || e.key != desiredKey(d, sum) {
		b.verified.forget(d.Name)
		return Observation{}, false, nil
	}
	if age := b.now().Sub(e.at); age >= b.verifyEvery || age < 0 {
		b.verified.forget(d.Name)
		return Observation{}, false, nil
	}
	st, err := b.svc.DomainGetState(ctx, e.dom)
	if err != nil || st != e.st {
		// Gone, replaced, stopped, or unreadable: the full read says which.
		b.verified.forget(d.Name)
		return Observation{}, false, nil
	}
	o := e.o
	if err := b.reachable(ctx, &o, e.dom, d, e.o.Extra.MACAddress, e.o.ConfigChecksum); err != nil {
		return Observation{}, true, err
	}
	return o, true, nil
}

// remember keeps what a full Observe found of a running, up-to-date domain.
func (b *Backend) remember(d Desired, di domainInfo, key string, o Observation) {
	if b.verifyEvery <= 0 || key == "" || o.State != commonv1alpha1.StateRunning || !o.UpToDate {
		b.verified.forget(d.Name)
		return
	}
	b.verified.put(d.Name, verifiedDomain{dom: di.Dom, st: di.State, key: key, o: o, at: b.now()})
}
