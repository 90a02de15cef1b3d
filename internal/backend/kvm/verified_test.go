/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/go-cmp/cmp"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

func TestObserveVerified(t *testing.T) {
	d := desired()
	mac := MACAddress(testUID)
	full := []string{
		"DomainLookupByName " + d.Name, "DomainGetState " + d.Name, "DomainGetXMLDesc " + d.Name,
		"StoragePoolLookupByName " + testPool, "StorageVolLookupByName " + overlayName(d.Name),
		"StorageVolGetXMLDesc " + overlayName(d.Name), "StorageVolLookupByName " + seedName(d.Name),
		"DomainInterfaceAddresses " + d.Name,
	}
	type want struct {
		calls    []string
		upToDate bool
		state    commonv1alpha1.InstanceState
		diff     string
	}
	cases := map[string]struct {
		reason string
		opts   []Option
		// between runs between the first (full) Observe and the second.
		between func(*fake, *time.Time)
		d       Desired
		want    want
	}{
		"Steady": {
			reason:  "A domain verified a poll ago costs its state and its address: two RPCs.",
			between: func(*fake, *time.Time) {},
			d:       d,
			want:    want{calls: []string{"DomainGetState " + d.Name, "DomainInterfaceAddresses " + d.Name}, upToDate: true, state: commonv1alpha1.StateRunning},
		},
		"Stopped": {
			reason: "A domain whose state changed is read in full, and reported as it is now.",
			between: func(f *fake, _ *time.Time) {
				f.domains[d.Name].state = domainState{State: golibvirt.DomainShutoff, Reason: int32(golibvirt.DomainShutoffCrashed)}
			},
			d:    d,
			want: want{calls: append([]string{"DomainGetState " + d.Name}, full[:7]...), upToDate: true, state: commonv1alpha1.StateTerminated},
		},
		"Gone": {
			reason:  "A domain that is gone is read in full: NotFound.",
			between: func(f *fake, _ *time.Time) { delete(f.domains, d.Name) },
			d:       d,
			want:    want{calls: []string{"DomainGetState " + d.Name, "DomainLookupByName " + d.Name}},
		},
		"SpecChanged": {
			reason:  "Another desired state is compared in full.",
			between: func(*fake, *time.Time) {},
			d:       desired(withMemory(512)),
			want:    want{calls: full, state: commonv1alpha1.StateRunning, diff: "memory"},
		},
		"DriftWithinTheInterval": {
			reason:  "A volume deleted behind the provider's back is not seen before the verify interval ends: that is the bound.",
			between: func(f *fake, _ *time.Time) { delete(f.pools[testPool], seedName(d.Name)) },
			d:       d,
			want:    want{calls: []string{"DomainGetState " + d.Name, "DomainInterfaceAddresses " + d.Name}, upToDate: true, state: commonv1alpha1.StateRunning},
		},
		"DriftSeenOnceVerified": {
			reason: "Once the interval is over the domain is read in full, and the deleted volume seen.",
			between: func(f *fake, now *time.Time) {
				delete(f.pools[testPool], seedName(d.Name))
				*now = now.Add(DefaultVerifyInterval)
			},
			d:    d,
			want: want{calls: full, state: commonv1alpha1.StateRunning, diff: seedName(d.Name)},
		},
		"Off": {
			reason:  "With a verify interval of 0 every Observe reads everything.",
			opts:    []Option{WithVerifyInterval(0)},
			between: func(*fake, *time.Time) {},
			d:       d,
			want:    want{calls: full, upToDate: true, state: commonv1alpha1.StateRunning},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFake(append(healthyVolumes(d), withDomain(ourDomain(t, d), golibvirt.DomainRunning, 1), withAddress(d.Name, golibvirt.DomainInterfaceAddressesSrcAgent, mac, "192.168.150.10"))...)
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			b := testBackend(f, nil, append([]Option{WithClock(func() time.Time { return now })}, tc.opts...)...)
			if o, err := b.Observe(context.Background(), d); err != nil || !o.Ready || !o.UpToDate {
				t.Fatalf("first Observe: %+v, %v", o, err)
			}
			tc.between(f, &now)
			f.calls = nil
			o, _ := b.Observe(context.Background(), tc.d)
			if diff := cmp.Diff(tc.want.calls, f.calls); diff != "" {
				t.Errorf("%s\nRPCs: -want, +got:\n%s", tc.reason, diff)
			}
			if o.UpToDate != tc.want.upToDate || o.State != tc.want.state || !strings.Contains(o.Diff, tc.want.diff) {
				t.Errorf("%s\nObserve = UpToDate %v, State %q, Diff %q; want %v, %q, a diff containing %q", tc.reason, o.UpToDate, o.State, o.Diff, tc.want.upToDate, tc.want.state, tc.want.diff)
			}
		})
	}
}

// TestUpdateForgetsVerified: after Update, Observe reads the domain in full.
func TestUpdateForgetsVerified(t *testing.T) {
	d := desired()
	f := newFake(append(healthyVolumes(d), withDomain(ourDomain(t, d), golibvirt.DomainRunning, 1), withAddress(d.Name, golibvirt.DomainInterfaceAddressesSrcAgent, MACAddress(testUID), "192.168.150.10"))...)
	b := testBackend(f, nil)
	if _, err := b.Observe(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	f.calls = nil
	if _, err := b.Observe(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if len(f.calls) < 8 || f.calls[0] != "DomainLookupByName "+d.Name {
		t.Errorf("Observe after Update made %v, want the full read", f.calls)
	}
}
