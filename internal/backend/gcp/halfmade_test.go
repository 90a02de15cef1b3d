/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
)

func TestObserveMissing(t *testing.T) {
	other := ownership("11111111-2222-3333-4444-555555555555")
	d := desired()
	s, err := resolve(d)
	if err != nil {
		t.Fatal(err)
	}
	firewall := func(o backend.Ownership) *computepb.Firewall {
		fw, err := buildFirewall(testProject, s, d.Proxy.AllowedClientCIDRs, o)
		if err != nil {
			t.Fatal(err)
		}
		return fw
	}
	address := func(o backend.Ownership) *computepb.Address { return buildAddress(s, o) }
	id := "gce://" + testProject + "/" + testZone + "/" + testName
	halfMade := func(msg string, extra v1alpha1.GCPProxyObservation, own backend.Ownership) Observation {
		return Observation{ID: id, State: commonv1alpha1.StatePending, Message: msg, Diff: msg, Ownership: own, Extra: extra}
	}
	type args struct {
		s spec
		p parts
	}
	type want struct {
		o     Observation
		class backend.Class
	}
	retained, user := s, s
	retained.retain = true
	user.userAddress = true
	const notFound = backend.ClassNotFound
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"NothingLeft": {
			reason: "No part of ours at all: the proxy does not exist.",
			args:   args{s: s},
			want:   want{class: notFound},
		},
		"AddressAndFirewall": {
			reason: "Create crashed (or hit a quota) before the instance: not NotFound, or the resource would be deleted without Delete and both parts leak.",
			args:   args{s: s, p: parts{address: address(d.Ownership), firewall: firewall(d.Ownership)}},
			want: want{o: halfMade("the instance is missing; firewall rule "+testName+" and address "+testName+" exist",
				v1alpha1.GCPProxyObservation{AddressName: testName, FirewallName: testName}, d.Ownership)},
		},
		"FirewallOnly": {
			reason: "A firewall rule of ours is a part to finish or delete.",
			args:   args{s: s, p: parts{firewall: firewall(d.Ownership)}},
			want: want{o: halfMade("the instance is missing; firewall rule "+testName+" exists",
				v1alpha1.GCPProxyObservation{FirewallName: testName}, backend.Ownership{})},
		},
		"AddressOnly": {
			reason: "Delete stopped after the firewall rule and the instance (or Create after the address): the address is left to delete or use.",
			args:   args{s: s, p: parts{address: address(d.Ownership)}},
			want: want{o: halfMade("the instance is missing; address "+testName+" exists",
				v1alpha1.GCPProxyObservation{AddressName: testName}, d.Ownership)},
		},
		"RetainedAddressOnly": {
			reason: "A retained address outlives the proxy: it does not keep the resource from being deleted.",
			args:   args{s: retained, p: parts{address: address(d.Ownership)}},
			want:   want{class: notFound},
		},
		"RetainedAddressAndFirewall": {
			reason: "A retained address does not count, but the firewall rule does.",
			args:   args{s: retained, p: parts{address: address(d.Ownership), firewall: firewall(d.Ownership)}},
			want: want{o: halfMade("the instance is missing; firewall rule "+testName+" exists",
				v1alpha1.GCPProxyObservation{AddressName: testName, FirewallName: testName}, d.Ownership)},
		},
		"UserAddressOnly": {
			reason: "An address the user named is never ours to delete.",
			args:   args{s: user, p: parts{address: address(backend.Ownership{})}},
			want:   want{class: notFound},
		},
		"ForeignParts": {
			reason: "Parts of another resource are none of ours: NotFound, and Create says they are not ours.",
			args:   args{s: s, p: parts{address: address(other), firewall: firewall(other)}},
			want:   want{class: notFound},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, err := observeMissing(testProject, tc.args.s, d, tc.args.p)
			if got := backend.ClassOf(err); got != tc.want.class {
				t.Errorf("%s\nobserveMissing(...) = %v, class %s; want class %s", tc.reason, err, got, tc.want.class)
			}
			if diff := cmp.Diff(tc.want.o, o); diff != "" {
				t.Errorf("%s\nobserveMissing(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestHalfMade stops Create between the firewall rule and the instance,
// through the real compute client on the fake, and checks that the proxy
// is neither reported gone nor replaced: Update finishes it, and Delete
// removes every part of it.
func TestHalfMade(t *testing.T) {
	cases := map[string]struct {
		reason string
		fault  func(*gcpfake.Server)
	}{
		"QuotaOnInstance": {
			reason: "The instance insert fails on quota after the address and the firewall rule were made.",
			fault: func(s *gcpfake.Server) {
				s.FailOperations(gcpfake.OperationFault{Match: gcpfake.Match{Call: gcpfake.CallInstancesInsert}, Code: "QUOTA_EXCEEDED"})
			},
		},
		"CrashBeforeInstance": {
			reason: "The provider dies before it sends the instance insert (the insert never reaches the API).",
			fault: func(s *gcpfake.Server) {
				s.InjectError(gcpfake.ErrorFault{Match: gcpfake.Match{Call: gcpfake.CallInstancesInsert}, Code: 403, Reason: "forbidden"})
			},
		},
	}
	for name, tc := range cases {
		for _, then := range []string{"Completed", "Deleted"} {
			t.Run(name+"/"+then, func(t *testing.T) {
				e := newEnv(t)
				d := desired()
				tc.fault(e.fake)
				if err := e.b.Create(ctx(t), d); err == nil {
					t.Fatalf("%s\nCreate succeeded, want it to fail on the instance", tc.reason)
				}
				e.fake.ClearFaults()
				if len(e.fake.Instances()) != 0 || len(e.fake.Addresses()) != 1 || len(e.fake.Firewalls()) != 1 {
					t.Fatalf("want the address and the firewall rule without an instance")
				}
				o, err := e.b.Observe(ctx(t), d)
				if err != nil || o.State != commonv1alpha1.StatePending || o.UpToDate || o.Ready {
					t.Fatalf("%s\nObserve of a half made proxy = %+v, %v; want Pending, not up to date, not NotFound", tc.reason, o, err)
				}
				switch then {
				case "Completed":
					e.clock.advance(DefaultRetryInterval)
					e.converge(t, d, 5)
					if n := len(e.fake.Instances()); n != 1 {
						t.Errorf("%s\nwant exactly one instance, got %d", tc.reason, n)
					}
					if n := e.fake.Calls(gcpfake.CallInstancesDelete); n != 0 {
						t.Errorf("%s\na half made proxy is finished, not replaced: %d instance deletes", tc.reason, n)
					}
				case "Deleted":
					e.deleteAll(t, d, 6)
					if n := len(e.fake.Instances()) + len(e.fake.Firewalls()) + len(e.fake.Addresses()); n != 0 {
						t.Errorf("%s\nafter Delete %d parts are left: %v %v", tc.reason, n, e.fake.Firewalls(), e.fake.Addresses())
					}
				}
			})
		}
	}
}
