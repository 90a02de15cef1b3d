/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// TestCheckMACReads: converging N proxies must not read every domain's XML
// for every Create (N² RPCs), yet still see a MAC conflict with a domain
// that appeared since the last read.
func TestCheckMACReads(t *testing.T) {
	const foreign = "someone-elses-vm"
	proxy := func(i int) Desired { return desired(withOwnerUID(fmt.Sprintf("0b4f2d7e-1111-4c2a-9d7e-%012d", i))) }
	cases := map[string]struct {
		reason string
		// between runs between the first and the second Create.
		between   func(*fake, *time.Time)
		wantReads int
		wantClass backend.Class
	}{
		"Remembered": {
			reason:    "The second Create reads no XML of a domain the first one read.",
			between:   func(*fake, *time.Time) {},
			wantReads: 1,
		},
		"Expired": {
			reason:    "After macTTL the domain is read again: an in-place edit is seen within it.",
			between:   func(_ *fake, now *time.Time) { *now = now.Add(macTTL) },
			wantReads: 2,
		},
		"NewDomainWithTheMAC": {
			reason: "A domain that appeared since is read at once, and its MAC refused.",
			between: func(f *fake, _ *time.Time) {
				withDomain(nicDomain("newcomer", MACAddress(proxy(1).Ownership.Owner.UID)), golibvirt.DomainRunning, 1)(f)
			},
			wantReads: 1,
			wantClass: backend.ClassPermanent,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFake(withDriver(DriverTest), withDomain(nicDomain(foreign, "52:54:00:12:34:56"), golibvirt.DomainRunning, 1))
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			b := testBackend(f, nil, WithClock(func() time.Time { return now }))
			if err := b.Create(context.Background(), proxy(0)); err != nil {
				t.Fatalf("first Create: %v", err)
			}
			tc.between(f, &now)
			err := b.Create(context.Background(), proxy(1))
			if diff := cmp.Diff(tc.wantClass, backend.ClassOf(err)); diff != "" {
				t.Errorf("%s\nsecond Create: class -want +got:\n%s\n%v", tc.reason, diff, err)
			}
			reads := 0
			for _, c := range f.calls {
				if c == "DomainGetXMLDesc "+foreign {
					reads++
				}
			}
			if reads != tc.wantReads {
				t.Errorf("%s\nXML reads of %s: %d, want %d", tc.reason, foreign, reads, tc.wantReads)
			}
		})
	}
}

func TestMACIndexKeep(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	old, fresh := golibvirt.Domain{Name: "old"}, golibvirt.Domain{Name: "fresh"}
	cases := map[string]struct {
		reason string
		doms   []golibvirt.Domain
		want   []string
	}{
		"Listed": {
			reason: "Domains in the list are kept.",
			doms:   []golibvirt.Domain{old, fresh},
			want:   []string{"fresh", "old"},
		},
		"GoneBeforeTheList": {
			reason: "A domain read before the list and missing from it is gone: forgotten.",
			doms:   []golibvirt.Domain{fresh},
			want:   []string{"fresh"},
		},
		"ReadAfterTheList": {
			reason: "A domain read after the list began (by a concurrent Create) may be newer than the list: kept.",
			doms:   nil,
			want:   []string{"fresh"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var x macIndex
			read := func() (devices, error) { return devices{MACs: []string{"52:54:00:00:00:01"}}, nil }
			_, _ = x.of(old, t0, read)
			_, _ = x.of(fresh, t0.Add(2*time.Second), read)
			x.keep(tc.doms, t0.Add(time.Second))
			var got []string
			for k := range x.read {
				got = append(got, k.name)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("%s\nremembered: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestMACIndexOneRead: concurrent Creates that meet a domain they do not
// know read its XML once between them.
func TestMACIndexOneRead(t *testing.T) {
	var x macIndex
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	reads := 0
	release := make(chan struct{})
	read := func() (devices, error) {
		mu.Lock()
		reads++
		mu.Unlock()
		<-release
		return devices{MACs: []string{"52:54:00:00:00:01"}}, nil
	}
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := x.of(golibvirt.Domain{Name: "vm"}, now.Add(time.Duration(i)*time.Millisecond), read); err != nil {
				t.Error(err)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	close(release)
	wg.Wait()
	if reads != 1 {
		t.Errorf("10 concurrent lookups of one domain made %d reads, want 1", reads)
	}
}
