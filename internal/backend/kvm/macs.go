/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"
)

// macTTL is how long checkHost trusts the devices it read of a domain. Reading
// every domain's XML for every Create made converging N proxies cost N²
// RPCs; a new domain (a new UUID) is read at once, and a domain redefined
// in place (virsh edit keeps its UUID) within this.
const macTTL = time.Minute

type domainKey struct {
	name string
	uuid golibvirt.UUID
}

type macsRead struct {
	devs devices
	at   time.Time
}

// devices are what Create reads of the host's other domains: their NICs'
// MACs and their disks' sources (Policy.checkBaseImage).
type devices struct {
	MACs  []string
	Disks []string
}

// macIndex remembers the devices of the host's domains, for checkHost.
type macIndex struct {
	mu   sync.Mutex
	read map[domainKey]macsRead
	// reading are the reads in flight: concurrent Creates wait for one
	// read of a domain rather than each make their own.
	reading map[domainKey]chan struct{}
}

// of returns the devices of dom, read with read when unknown or older than
// macTTL.
func (x *macIndex) of(dom golibvirt.Domain, now time.Time, read func() (devices, error)) (devices, error) {
	k := domainKey{name: dom.Name, uuid: dom.UUID}
	for {
		x.mu.Lock()
		r, ok := x.read[k]
		if ok && now.Sub(r.at) < macTTL && r.at.Sub(now) < macTTL {
			x.mu.Unlock()
			return r.devs, nil
		}
		wait, busy := x.reading[k]
		if !busy {
			break // x.mu is held
		}
		x.mu.Unlock()
		// Bounded by the reader's context. Then the entry is fresh, or
		// that read failed and this caller reads.
		<-wait
	}
	if x.reading == nil {
		x.reading = map[domainKey]chan struct{}{}
	}
	done := make(chan struct{})
	x.reading[k] = done
	x.mu.Unlock()
	devs, err := read()
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.reading, k)
	close(done)
	if err != nil {
		return devices{}, err
	}
	if x.read == nil {
		x.read = map[domainKey]macsRead{}
	}
	x.read[k] = macsRead{devs: devs, at: now}
	return devs, nil
}

// keep forgets every domain not in doms, a list made at listed. A domain
// read since may be newer than the list: concurrent Creates list at
// different times, and must not forget each other's reads.
func (x *macIndex) keep(doms []golibvirt.Domain, listed time.Time) {
	live := make(map[domainKey]bool, len(doms))
	for _, d := range doms {
		live[domainKey{name: d.Name, uuid: d.UUID}] = true
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for k, r := range x.read {
		if !live[k] && r.at.Before(listed) {
			delete(x.read, k)
		}
	}
}

// domainDevices returns the devices of dom, from the index when fresh.
func (b *Backend) domainDevices(ctx context.Context, dom golibvirt.Domain) (devices, error) {
	return b.macs.of(dom, b.now(), func() (devices, error) {
		desc, err := b.svc.DomainGetXMLDesc(ctx, dom)
		if err != nil {
			return devices{}, classify(errors.Wrap(err, errDomainXML))
		}
		return devicesOf(desc)
	})
}
