/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
)

func TestLifecycle(t *testing.T) {
	for name, polls := range map[string]int{"QuickOperations": 1, "SlowOperations": 3} {
		t.Run(name, func(t *testing.T) { testLifecycle(t, polls) })
	}
}

// testLifecycle creates, observes and deletes a proxy on a fake whose
// operations need polls observations to finish.
func testLifecycle(t *testing.T, polls int) {
	e := newEnv(t, gcpfake.WithOperationPolls(polls))
	d := desired()
	if _, err := e.b.Observe(ctx(t), d); !backend.IsNotFound(err) {
		t.Fatalf("Observe before Create = %v, want NotFound", err)
	}
	if err := e.b.Create(ctx(t), d); err != nil {
		t.Fatalf("Create: %v", err)
	}

	ip := addressIP(t, e.fake, testName)
	addrs, fws, insts := e.fake.Addresses(), e.fake.Firewalls(), e.fake.Instances()
	if len(addrs) != 1 || !ownedBy(addrs[0].GetLabels(), d.Ownership) || ip == "" {
		t.Fatalf("want one address of ours with an IP, got %v", addrs)
	}
	if len(fws) != 1 || !firewallOwnedBy(fws[0].GetDescription(), d.Ownership) {
		t.Fatalf("want one firewall rule of ours, got %v", fws)
	}
	if diff := cmp.Diff([]string{"10.0.0.0/8", "192.0.2.0/24"}, fws[0].GetSourceRanges()); diff != "" {
		t.Errorf("firewall source ranges: -want +got:\n%s", diff)
	}
	if len(insts) != 1 {
		t.Fatalf("want one instance, got %d", len(insts))
	}
	inst := insts[0]
	if !ownedBy(inst.GetLabels(), d.Ownership) || inst.GetLabels()["team"] != "a" {
		t.Errorf("instance labels %v lack ownership or user labels", inst.GetLabels())
	}
	if ud := metadataValue(inst, MetadataUserData); !strings.HasPrefix(ud, "#cloud-config\n") {
		t.Errorf("instance user-data is not a cloud-config: %.40q", ud)
	}
	if !strings.Contains(metadataValue(inst, MetadataStartupScript), "put /etc/squid/squid.conf root:root 0644") {
		t.Errorf("instance startup-script does not write squid.conf")
	}
	if natIP(inst) != ip {
		t.Errorf("instance natIP = %q, want the static address %q", natIP(inst), ip)
	}

	o := e.untilReady(t, d, 5+polls)
	want := Observation{
		ID:             "gce://test-project/us-central1-a/" + testName,
		State:          commonv1alpha1.StateRunning,
		Ready:          true,
		Message:        msgServing,
		Endpoint:       ip + ":3128",
		EgressIPs:      []string{ip},
		CreatedAt:      o.CreatedAt,
		Ownership:      d.Ownership,
		UpToDate:       true,
		ConfigChecksum: metadataValue(inst, MetadataConfigChecksum),
		Extra:          v1alpha1.GCPProxyObservation{InternalIP: internalIP(inst), AddressName: testName, FirewallName: testName},
	}
	if diff := cmp.Diff(want, o); diff != "" {
		t.Errorf("Observe: -want +got:\n%s", diff)
	}
	if o.CreatedAt.IsZero() || o.Extra.InternalIP == "" {
		t.Errorf("Observe must read CreatedAt and the internal IP back, got %v and %q", o.CreatedAt, o.Extra.InternalIP)
	}
	if l, err := e.b.List(ctx(t)); err != nil || len(l) != 1 || l[0].ID != want.ID || l[0].Ownership != d.Ownership {
		t.Errorf("List = %+v, %v; want the one instance with its ownership", l, err)
	}
	if err := e.b.CheckHealth(ctx(t)); err != nil {
		t.Errorf("CheckHealth: %v", err)
	}

	e.deleteAll(t, d, 4*polls+4)
	if n := len(e.fake.Instances()) + len(e.fake.Firewalls()) + len(e.fake.Addresses()); n != 0 {
		t.Errorf("after Delete %d resources are left: %v %v %v", n, e.fake.Instances(), e.fake.Firewalls(), e.fake.Addresses())
	}
	if err := e.b.Delete(ctx(t), d); err != nil {
		t.Errorf("Delete of a deleted proxy must succeed: %v", err)
	}
}

func TestReplaceTerminated(t *testing.T) {
	for _, status := range []string{"TERMINATED", "SUSPENDED"} {
		t.Run(status, func(t *testing.T) {
			e := newEnv(t)
			d := desired()
			if err := e.b.Create(ctx(t), d); err != nil {
				t.Fatalf("Create: %v", err)
			}
			before := e.untilReady(t, d, 5)
			if err := e.fake.SetInstanceStatus(testProject, testZone, testName, status); err != nil {
				t.Fatal(err)
			}
			// Observe sees a change it did not make at the next list.
			e.clock.advance(DefaultListTTL)
			o, err := e.b.Observe(ctx(t), d)
			if err != nil || (o.State != commonv1alpha1.StateTerminated && o.State != commonv1alpha1.StateStopped) || o.Ready {
				t.Fatalf("Observe of a %s instance = %+v, %v; want Terminated or Stopped, not ready", status, o, err)
			}
			replaced := false
			for range 5 {
				if err := e.b.Update(ctx(t), d); err != nil {
					t.Fatalf("Update: %v", err)
				}
				if len(e.fake.Instances()) == 0 {
					replaced = true
					break
				}
			}
			if !replaced {
				t.Fatalf("Update did not delete the %s instance", status)
			}
			if len(e.fake.Addresses()) != 1 || len(e.fake.Firewalls()) != 1 {
				t.Errorf("replacement must keep the address and the firewall rule")
			}
			// The address and the firewall rule remain: the proxy is not
			// gone but half made, and Update makes the instance again.
			o, err = e.b.Observe(ctx(t), d)
			if err != nil || o.State != commonv1alpha1.StatePending || o.UpToDate {
				t.Fatalf("Observe of the replaced instance = %+v, %v; want Pending and not up to date", o, err)
			}
			after := e.converge(t, d, 5)
			if diff := cmp.Diff(before.EgressIPs, after.EgressIPs); diff != "" {
				t.Errorf("the egress IP must survive replacement: -before +after:\n%s", diff)
			}
			if len(e.fake.Instances()) != 1 {
				t.Errorf("want exactly one instance, got %d", len(e.fake.Instances()))
			}
		})
	}
}

// reconcileRound does what the managed reconciler does for an existing
// resource: Observe, then Create when NotFound, Update when not up to date.
func reconcileRound(e *env, t *testing.T, d Desired) error {
	t.Helper()
	o, err := e.b.Observe(ctx(t), d)
	switch {
	case backend.IsNotFound(err):
		return e.b.Create(ctx(t), d)
	case err != nil:
		return err
	case !o.UpToDate || o.State == commonv1alpha1.StateStopped || o.State == commonv1alpha1.StateTerminated:
		return e.b.Update(ctx(t), d)
	}
	return nil
}

func TestQuotaIsReportedNotRetried(t *testing.T) {
	cases := map[string]struct {
		reason string
		fault  func(*gcpfake.Server)
	}{
		"ProjectQuota": {
			reason: "An insert beyond the project's CPU quota fails in its operation with QUOTA_EXCEEDED and httpErrorStatusCode 403.",
			fault:  func(s *gcpfake.Server) { s.SetQuota(testProject, gcpfake.Quota{CPUs: 1}) },
		},
		"QuotaWithoutHTTPStatus": {
			reason: "op.Wait returns nil for an operation without httpErrorStatusCode: the error must be read from the operation.",
			fault: func(s *gcpfake.Server) {
				s.FailOperations(gcpfake.OperationFault{Match: gcpfake.Match{Call: gcpfake.CallInstancesInsert}, Code: "QUOTA_EXCEEDED"})
			},
		},
		"ZoneExhausted": {
			reason: "ZONE_RESOURCE_POOL_EXHAUSTED (503 in httpErrorStatusCode) is a lack of capacity: Quota.",
			fault: func(s *gcpfake.Server) {
				s.FailOperations(gcpfake.OperationFault{Match: gcpfake.Match{Call: gcpfake.CallInstancesInsert}, Code: "ZONE_RESOURCE_POOL_EXHAUSTED", HTTPStatus: 503})
			},
		},
	}
	const rounds = 8
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			d := desired()
			tc.fault(e.fake)
			quota := 0
			for range rounds {
				err := reconcileRound(e, t, d)
				switch backend.ClassOf(err) {
				case backend.ClassQuota:
					quota++
				case backend.ClassNone:
				default:
					t.Fatalf("%s\nround error %v has class %s, want Quota", tc.reason, err, backend.ClassOf(err))
				}
			}
			if quota < rounds-1 {
				t.Errorf("%s\n%d of %d rounds reported Quota, want at least %d", tc.reason, quota, rounds, rounds-1)
			}
			if n := e.fake.Calls(gcpfake.CallInstancesInsert); n > rounds {
				t.Errorf("%s\n%d insert calls in %d rounds, want at most one per round", tc.reason, n, rounds)
			}
			if n := len(e.fake.Operations()); n > 4 {
				// address insert, firewall insert, one instance insert, and
				// nothing else: every later insert was a replay.
				t.Errorf("%s\n%d operations, want one instance insert attempt in the retry window", tc.reason, n)
			}

			e.fake.ClearFaults()
			e.clock.advance(DefaultRetryInterval)
			if err := reconcileRound(e, t, d); err != nil {
				t.Fatalf("once quota is back, the next window's insert must succeed: %v", err)
			}
			e.untilReady(t, d, 5)
		})
	}
}

func TestCrashAfterInsert(t *testing.T) {
	cases := map[string]struct {
		reason string
		later  time.Duration
	}{
		"SameWindow": {
			reason: "The retried insert carries the same request ID: GCE replays the first operation.",
		},
		"NextWindow": {
			reason: "A later insert has a new request ID: alreadyExists, and the instance is adopted by its labels.",
			later:  DefaultRetryInterval,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			d := desired()
			lost := &lossyInstances{instancesAPI: e.b.svc.instances, lose: 1}
			e.b.svc.instances = lost
			if err := e.b.Create(ctx(t), d); backend.ClassOf(err) != backend.ClassTransient {
				t.Fatalf("Create that lost the insert response = %v, want a Transient error", err)
			}
			e.clock.advance(tc.later)
			if err := e.b.Create(ctx(t), d); err != nil {
				t.Fatalf("%s\nCreate after the crash: %v", tc.reason, err)
			}
			if n := len(e.fake.Instances()); n != 1 {
				t.Errorf("%s\nwant exactly one instance, got %d", tc.reason, n)
			}
			e.untilReady(t, d, 5)
		})
	}
}

func TestForeignParts(t *testing.T) {
	other := ownership("11111111-2222-3333-4444-555555555555")
	otherInstance := ownership(testUID)
	otherInstance.ProviderInstance = "staging"
	userAddress := func(d *Desired) { d.Params.Address = &v1alpha1.GCPAddress{Name: proto.String("team-b-ip")} }
	const foreignUserAddress = "spec.forProvider.address.name: address team-b-ip carries the ownership labels of another resource or provider instance"
	cases := map[string]struct {
		reason string
		setup  func(*testing.T, *env)
		mod    func(*Desired)
		msg    string
	}{
		"UserAddressOfAnother": {
			reason: "A user-named address that another proxy reserved (retained, or between two of its VMs) is that team's egress IP: Permanent, and not attached.",
			setup: func(t *testing.T, e *env) {
				reserve(t, e.fake, "team-b-ip", ownershipLabels(other))
			},
			mod: userAddress,
			msg: foreignUserAddress,
		},
		"UserAddressOfAnotherProviderInstance": {
			reason: "A user-named address of another provider instance sharing the project is not ours either.",
			setup: func(t *testing.T, e *env) {
				reserve(t, e.fake, "team-b-ip", ownershipLabels(otherInstance))
			},
			mod: userAddress,
			msg: foreignUserAddress,
		},
		"UserAddressWithSomeOwnershipLabels": {
			reason: "Any ownership label marks an address the provider made: without our full ownership it is refused.",
			setup: func(t *testing.T, e *env) {
				reserve(t, e.fake, "team-b-ip", map[string]string{backend.CloudLabelKeys.ManagedBy: backend.ManagedByValue})
			},
			mod: userAddress,
			msg: foreignUserAddress,
		},
		"AddressOfAnother": {
			reason: "An address of our name reserved for another resource is Permanent, and not used.",
			setup: func(t *testing.T, e *env) {
				reserve(t, e.fake, testName, ownershipLabels(other))
			},
			msg: "address " + testName + " already exists but its ownership labels do not name this resource",
		},
		"AddressConflict": {
			reason: "A 409 alreadyExists on the address insert (another reserved it between our read and our insert) is Permanent when the labels are not ours.",
			setup: func(t *testing.T, e *env) {
				reserve(t, e.fake, testName, map[string]string{"owner": "someone"})
				e.b.svc.addresses = &blindAddresses{addressesAPI: e.b.svc.addresses, blind: 1}
			},
			msg: "address " + testName + " already exists but its ownership labels do not name this resource",
		},
		"FirewallOfAnother": {
			reason: "A firewall rule of our name that another resource owns is Permanent.",
			setup: func(t *testing.T, e *env) {
				fw, err := buildFirewall(testProject, spec{name: testName, network: "default", port: 3128}, []string{"0.0.0.0/0"}, other)
				if err != nil {
					t.Fatal(err)
				}
				waited(t)(rawFirewalls(t, e.fake).Insert(ctx(t), &computepb.InsertFirewallRequest{Project: testProject, FirewallResource: fw}))
			},
			msg: "firewall rule " + testName + " already exists but its description does not name this resource",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			tc.setup(t, e)
			d := desired()
			if tc.mod != nil {
				tc.mod(&d)
			}
			err := e.b.Create(ctx(t), d)
			if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s\nCreate = %v (class %s), want a Permanent error containing %q", tc.reason, err, backend.ClassOf(err), tc.msg)
			}
			if n := len(e.fake.Instances()); n != 0 {
				t.Errorf("%s\n%d instances were created, want none", tc.reason, n)
			}
		})
	}
}
