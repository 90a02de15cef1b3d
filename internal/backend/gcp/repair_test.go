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
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// converge runs reconcile rounds until the proxy is ready and up to date.
func (e *env) converge(t *testing.T, d Desired, rounds int) Observation {
	t.Helper()
	for range rounds {
		if err := reconcileRound(e, t, d); err != nil {
			t.Fatalf("reconcile round: %v", err)
		}
		e.guestReports(t, GuestServing, "")
		if o, err := e.b.Observe(ctx(t), d); err == nil && o.Ready && o.UpToDate {
			return o
		}
	}
	o, err := e.b.Observe(ctx(t), d)
	t.Fatalf("not ready and up to date after %d rounds: %+v, %v", rounds, o, err)
	return o
}

func TestRepairDrift(t *testing.T) {
	cases := map[string]struct {
		reason string
		drift  func(*testing.T, *env)
		diff   string
	}{
		"FirewallOpened": {
			reason: "A firewall rule opened to everyone is patched back to the allowed clients.",
			drift:  openFirewall,
			diff:   "firewall source ranges are [0.0.0.0/0]",
		},
		"FirewallDeleted": {
			reason: "A deleted firewall rule is inserted again.",
			drift:  deleteFirewall,
			diff:   "firewall rule " + testName + " is missing",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			d := desired()
			before := e.converge(t, d, 5)
			tc.drift(t, e)
			o, err := e.b.Observe(ctx(t), d)
			if err != nil || o.UpToDate || !strings.Contains(o.Diff, tc.diff) {
				t.Fatalf("%s\nObserve after drift = UpToDate %v, Diff %q, %v; want a diff containing %q", tc.reason, o.UpToDate, o.Diff, err, tc.diff)
			}
			after := e.converge(t, d, 5)
			if diff := cmp.Diff(before.EgressIPs, after.EgressIPs); diff != "" {
				t.Errorf("%s\nthe egress IP changed: %s", tc.reason, diff)
			}
			if diff := cmp.Diff([]string{"10.0.0.0/8", "192.0.2.0/24"}, e.fake.Firewalls()[0].GetSourceRanges()); diff != "" {
				t.Errorf("%s\nfirewall source ranges: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestChangeAppliesLive changes what squid serves: the backend writes the
// new metadata (setMetadata, with the fingerprint it read) and the guest
// applies it; the instance stays, and Ready never goes False.
func TestChangeAppliesLive(t *testing.T) {
	cases := map[string]struct {
		reason string
		change func(*Desired)
		diff   string
	}{
		"Destinations": {
			reason: "A new allowlist is a new squid configuration.",
			change: func(d *Desired) { d.Proxy.AllowedDestinations = []string{"api.example.org"} },
			diff:   "metadata " + MetadataConfigChecksum,
		},
		"ClientsAndPort": {
			reason: "New clients and a new port change the configuration and the firewall rule, both in place.",
			change: func(d *Desired) { d.Proxy.AllowedClientCIDRs = []string{"10.1.0.0/16"}; d.Proxy.Port = 3129 },
			diff:   "firewall source ranges",
		},
		"Password": {
			reason: "New credentials are a new htpasswd file; the configuration stays.",
			change: func(d *Desired) { d.Credentials.Password = "rotated" },
			diff:   "does not accept the current credentials",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			d := desired()
			before := e.converge(t, d, 5)
			inst, _ := e.fake.Instance(testProject, testZone, testName)
			tc.change(&d)
			o, err := e.b.Observe(ctx(t), d)
			if err != nil || o.UpToDate || !strings.Contains(o.Diff, tc.diff) || !o.Ready {
				t.Fatalf("%s\nObserve after the change = Ready %v, UpToDate %v, Diff %q, %v; want Ready, and a diff containing %q", tc.reason, o.Ready, o.UpToDate, o.Diff, err, tc.diff)
			}
			e.fake.ResetCalls()
			if err := e.b.Update(ctx(t), d); err != nil {
				t.Fatalf("%s\nUpdate: %v", tc.reason, err)
			}
			got, _ := e.fake.Instance(testProject, testZone, testName)
			if e.fake.Calls(gcpfake.CallInstancesSetMetadata) != 1 || e.fake.Calls(gcpfake.CallInstancesDelete) != 0 {
				t.Errorf("%s\ncalls of Update: %v; want one setMetadata and no delete", tc.reason, e.fake.CallCounts())
			}
			if got.GetId() != inst.GetId() || got.GetCreationTimestamp() != inst.GetCreationTimestamp() {
				t.Errorf("%s\nthe instance was replaced", tc.reason)
			}
			want := wanted(mustSpec(t, d), d, mustSum(t, d), natIP(got))
			if diff := liveDiff(squid.NewVerifier(), want, got); len(diff) > 0 {
				t.Errorf("%s\nthe metadata after Update still differs: %v", tc.reason, diff)
			}
			// Until the guest applied it, squid serves the old configuration
			// and the proxy is Ready but not up to date.
			o, err = e.b.Observe(ctx(t), d)
			if err != nil || !o.Ready || o.UpToDate || o.ConfigChecksum != before.ConfigChecksum {
				t.Errorf("%s\nObserve before the guest applied: Ready %v UpToDate %v ConfigChecksum %.12s, %v; want Ready, not up to date, the old checksum", tc.reason, o.Ready, o.UpToDate, o.ConfigChecksum, err)
			}
			// The guest applies it and reports; a second Update has nothing
			// to do.
			after := e.converge(t, d, 2)
			if after.ConfigChecksum != mustSum(t, d) || !after.CreatedAt.Equal(before.CreatedAt) {
				t.Errorf("%s\nafter the guest applied: ConfigChecksum %.12s CreatedAt %v; want %.12s and %v", tc.reason, after.ConfigChecksum, after.CreatedAt, mustSum(t, d), before.CreatedAt)
			}
			if n := e.fake.Calls(gcpfake.CallInstancesSetMetadata); n != 1 {
				t.Errorf("%s\n%d setMetadata calls, want 1", tc.reason, n)
			}
		})
	}
}

// TestLabelsAndTagsApplyLive changes the VM's labels or network tags: the
// backend sets them on the running VM (setLabels, setTags, with the
// fingerprint it read); the instance keeps its ID and creation time, and
// its ownership labels (which GC finds it by) and the labels Google added.
func TestLabelsAndTagsApplyLive(t *testing.T) {
	cases := map[string]struct {
		reason string
		change func(*Desired)
		call   string
		diff   string
	}{
		"Labels": {
			reason: "New user labels are set on the running VM, next to the ownership labels.",
			change: func(d *Desired) { d.Params.Labels = map[string]v1alpha1.LabelValue{"team": "b", "cost-center": "42"} },
			call:   gcpfake.CallInstancesSetLabels,
			diff:   `label team is "a", want "b"`,
		},
		"NetworkTags": {
			reason: "New network tags are set on the running VM; the firewall rule's own tag stays.",
			change: func(d *Desired) { d.Params.NetworkTags = []string{"allow-health-checks"} },
			call:   gcpfake.CallInstancesSetTags,
			diff:   "network tags are",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			WithPolicy(defaultConfigName, v1alpha1.GCPPolicy{NetworkTags: []string{"allow-health-checks"}})(e.b)
			d := desired()
			before := e.converge(t, d, 5)
			// VM Manager labels a VM behind the provider's back.
			inst, _ := e.fake.Instance(testProject, testZone, testName)
			google := inst.GetLabels()
			google["goog-ops-agent-policy"] = "v2"
			waited(t)(rawInstances(t, e.fake).SetLabels(ctx(t), &computepb.SetLabelsInstanceRequest{
				Project: testProject, Zone: testZone, Instance: testName,
				InstancesSetLabelsRequestResource: &computepb.InstancesSetLabelsRequest{LabelFingerprint: inst.LabelFingerprint, Labels: google},
			}))
			inst, _ = e.fake.Instance(testProject, testZone, testName)
			tc.change(&d)
			o, err := e.b.Observe(ctx(t), d)
			if err != nil || o.UpToDate || !strings.Contains(o.Diff, tc.diff) || !o.Ready {
				t.Fatalf("%s\nObserve after the change = Ready %v, UpToDate %v, Diff %q, %v; want Ready, and a diff containing %q", tc.reason, o.Ready, o.UpToDate, o.Diff, err, tc.diff)
			}
			e.fake.ResetCalls()
			if err := e.b.Update(ctx(t), d); err != nil {
				t.Fatalf("%s\nUpdate: %v", tc.reason, err)
			}
			calls := e.fake.CallCounts()
			if calls[tc.call] != 1 || calls[gcpfake.CallInstancesDelete]+calls[gcpfake.CallInstancesInsert]+calls[gcpfake.CallInstancesSetMetadata] != 0 {
				t.Errorf("%s\ncalls of Update: %v; want one %s, no delete, insert or setMetadata", tc.reason, calls, tc.call)
			}
			got, _ := e.fake.Instance(testProject, testZone, testName)
			if got.GetId() != inst.GetId() || got.GetCreationTimestamp() != inst.GetCreationTimestamp() {
				t.Errorf("%s\nthe instance was replaced: ID %d, created %s; want %d, %s", tc.reason, got.GetId(), got.GetCreationTimestamp(), inst.GetId(), inst.GetCreationTimestamp())
			}
			w := wanted(mustSpec(t, d), d, mustSum(t, d), natIP(got))
			if diff := append(labelDiff(w.Labels, got.GetLabels()), tagDiff(w.Tags, got.GetTags().GetItems())...); len(diff) > 0 {
				t.Errorf("%s\nthe instance after Update still differs: %v", tc.reason, diff)
			}
			if !ownedBy(got.GetLabels(), d.Ownership) || got.GetLabels()["goog-ops-agent-policy"] != "v2" {
				t.Errorf("%s\nlabels after Update: %v; want the ownership labels and Google's kept", tc.reason, got.GetLabels())
			}
			after := e.converge(t, d, 2)
			if !after.CreatedAt.Equal(before.CreatedAt) || after.ConfigChecksum != before.ConfigChecksum {
				t.Errorf("%s\nafter the change: CreatedAt %v ConfigChecksum %.12s; want %v and %.12s", tc.reason, after.CreatedAt, after.ConfigChecksum, before.CreatedAt, before.ConfigChecksum)
			}
			if n := e.fake.Calls(tc.call); n != 1 {
				t.Errorf("%s\n%d %s calls, want 1", tc.reason, n, tc.call)
			}
			// GC finds the instance by its ownership labels, as before.
			listed, err := e.b.List(ctx(t))
			if err != nil || len(listed) != 1 {
				t.Errorf("%s\nList after the change = %v, %v; want the instance", tc.reason, listed, err)
			}
		})
	}
}

// TestLabelsStale: labels someone changed between the backend's read and
// its setLabels are not overwritten: GCE refuses the stale fingerprint
// (412), Update fails Transient, and the next Update sets them.
func TestLabelsStale(t *testing.T) {
	e := newEnv(t)
	d := desired()
	e.converge(t, d, 5)
	d.Params.Labels = map[string]v1alpha1.LabelValue{"team": "b"}
	stale := &staleLabels{instancesAPI: e.b.svc.instances, t: t, fake: e.fake}
	e.b.svc.instances = stale
	err := e.b.Update(ctx(t), d)
	if backend.ClassOf(err) != backend.ClassTransient || !strings.Contains(err.Error(), "cannot set the labels of instance "+testName) {
		t.Fatalf("Update with labels changed under it = %v, want a Transient error naming the labels", err)
	}
	if got, _ := e.fake.Instance(testProject, testZone, testName); got.GetLabels()["someone"] != "else" {
		t.Errorf("labels after a refused setLabels: %v; want the other writer's kept", got.GetLabels())
	}
	if err := e.b.Update(ctx(t), d); err != nil {
		t.Fatalf("the next Update: %v", err)
	}
	if got, _ := e.fake.Instance(testProject, testZone, testName); got.GetLabels()["team"] != "b" {
		t.Errorf("labels after the next Update: %v; want team=b", got.GetLabels())
	}
}

// TestLiveApplyFailed: a guest that cannot apply a configuration keeps
// serving the one before (Ready) and says why, which Update returns.
func TestLiveApplyFailed(t *testing.T) {
	e := newEnv(t)
	d := desired()
	e.converge(t, d, 5)
	d.Proxy.AllowedDestinations = []string{"api.example.org"}
	if err := e.b.Update(ctx(t), d); err != nil {
		t.Fatalf("Update: %v", err)
	}
	sum := mustSum(t, d)
	inst, _ := e.fake.Instance(testProject, testZone, testName)
	failed := GuestReport(GuestFailed, AppliedConfig(sum, metadataValue(inst, MetadataHtpasswd)), e.clock.now(), "squid -k parse: FATAL: Bungled squid.conf line 7")
	if err := e.fake.SetGuestAttribute(testProject, testZone, testName, GuestApplyPath, failed); err != nil {
		t.Fatal(err)
	}
	o, err := e.b.Observe(ctx(t), d)
	if err != nil || !o.Ready || o.UpToDate || !strings.Contains(o.Diff, "FATAL: Bungled squid.conf line 7") {
		t.Errorf("Observe after a failed apply: Ready %v UpToDate %v Diff %q, %v; want Ready, not up to date, with the reason", o.Ready, o.UpToDate, o.Diff, err)
	}
	err = e.b.Update(ctx(t), d)
	if err == nil || !strings.Contains(err.Error(), "FATAL: Bungled squid.conf line 7") || !strings.Contains(err.Error(), sum[:12]) {
		t.Errorf("Update after a failed apply = %v, want the guest's reason and the checksum", err)
	}
	if n := e.fake.Calls(gcpfake.CallInstancesSetMetadata); n != 1 {
		t.Errorf("%d setMetadata calls, want 1: the metadata is current", n)
	}
	// A failure to apply another configuration is not this one's.
	if err := e.fake.SetGuestAttribute(testProject, testZone, testName, GuestApplyPath, GuestReport(GuestFailed, strings.Repeat("0", 64), e.clock.now(), "old")); err != nil {
		t.Fatal(err)
	}
	if err := e.b.Update(ctx(t), d); err != nil {
		t.Errorf("Update with an old failure = %v, want nil", err)
	}
}

func TestChangeReplacesInstance(t *testing.T) {
	cases := map[string]struct {
		reason string
		change func(*Desired)
		diff   string
	}{
		"MachineType": {
			reason: "A new machine type replaces the VM.",
			change: func(d *Desired) { d.Params.MachineType = "e2-medium" },
			diff:   "machine type is e2-small, want e2-medium",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			d := desired()
			before := e.converge(t, d, 5)
			tc.change(&d)
			o, err := e.b.Observe(ctx(t), d)
			if err != nil || o.UpToDate || !strings.Contains(o.Diff, tc.diff) {
				t.Fatalf("%s\nObserve after the change = UpToDate %v, Diff %q, %v; want a diff containing %q", tc.reason, o.UpToDate, o.Diff, err, tc.diff)
			}
			after := e.converge(t, d, 8)
			if diff := cmp.Diff(before.EgressIPs, after.EgressIPs); diff != "" {
				t.Errorf("%s\nthe egress IP must survive replacement: %s", tc.reason, diff)
			}
			if after.CreatedAt.Before(before.CreatedAt) || len(e.fake.Instances()) != 1 {
				t.Errorf("%s\nwant one new instance", tc.reason)
			}
		})
	}
}

func TestDeleteKeeps(t *testing.T) {
	cases := map[string]struct {
		reason string
		mod    func(*Desired)
		setup  func(*testing.T, *env)
		// gc deletes as the garbage collector does, with Name and Ownership only.
		gc   bool
		left []string
	}{
		"RetainAddress": {
			reason: "retainAddressOnDelete keeps the address.",
			mod:    func(d *Desired) { d.Params.RetainAddressOnDelete = true },
			left:   []string{testName},
		},
		"UserAddress": {
			reason: "An address the user named is never deleted.",
			mod:    func(d *Desired) { d.Params.Address = &v1alpha1.GCPAddress{Name: proto.String("team-ip")} },
			setup: func(t *testing.T, e *env) {
				WithPolicy(defaultConfigName, v1alpha1.GCPPolicy{Addresses: []string{"team-ip"}})(e.b)
				reserve(t, e.fake, "team-ip", nil)
			},
			left: []string{"team-ip"},
		},
		"GarbageCollector": {
			reason: "With only Name and Ownership the zone is found by label; the address is kept, as it may be retained on purpose.",
			gc:     true,
			left:   []string{testName},
		},
		"Default": {
			reason: "By default everything goes.",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			d := desired()
			if tc.mod != nil {
				tc.mod(&d)
			}
			if tc.setup != nil {
				tc.setup(t, e)
			}
			o := e.converge(t, d, 5)
			if tc.setup != nil && o.EgressIPs[0] != addressIP(t, e.fake, "team-ip") {
				t.Errorf("%s\nthe VM must use the user's address", tc.reason)
			}
			del := d
			if tc.gc {
				del = Desired{Name: d.Name, Ownership: d.Ownership}
			}
			for range 6 {
				if err := e.b.Delete(ctx(t), del); err != nil {
					t.Fatalf("%s\nDelete: %v", tc.reason, err)
				}
			}
			if _, err := e.b.Observe(ctx(t), d); !tc.gc && !backend.IsNotFound(err) {
				t.Errorf("%s\nObserve after Delete = %v, want NotFound", tc.reason, err)
			}
			var left []string
			for _, a := range e.fake.Addresses() {
				left = append(left, a.GetName())
			}
			if diff := cmp.Diff(tc.left, left); diff != "" {
				t.Errorf("%s\naddresses left: -want +got:\n%s", tc.reason, diff)
			}
			if n := len(e.fake.Instances()) + len(e.fake.Firewalls()); n != 0 {
				t.Errorf("%s\n%d instances and firewall rules are left", tc.reason, n)
			}
		})
	}
}

func TestObserveLeftovers(t *testing.T) {
	e := newEnv(t)
	d := desired()
	e.converge(t, d, 5)
	// Delete removes the firewall rule first: from then on a missing
	// instance means "being deleted", not "to be created". The address
	// delete fails here, so Delete stops half-way.
	e.fake.InjectError(gcpfake.ErrorFault{Match: gcpfake.Match{Call: gcpfake.CallAddressesDelete}, Code: 503, Times: 1})
	if err := e.b.Delete(ctx(t), d); backend.ClassOf(err) != backend.ClassTransient {
		t.Fatalf("Delete with a failing address delete = %v, want a Transient error", err)
	}
	if len(e.fake.Instances())+len(e.fake.Firewalls()) != 0 || len(e.fake.Addresses()) != 1 {
		t.Fatalf("want only the address left")
	}
	o, err := e.b.Observe(ctx(t), d)
	if err != nil || o.State != commonv1alpha1.StatePending || o.UpToDate {
		t.Fatalf("Observe with only the address left = %+v, %v; want it reported Pending and not up to date so Delete goes on", o, err)
	}
	// Were the resource not being deleted, Update would make it whole again.
	if err := e.b.Update(ctx(t), d); err != nil {
		t.Fatalf("Update: %v", err)
	}
	e.converge(t, d, 5)
}

func TestErrorClasses(t *testing.T) {
	cases := map[string]struct {
		reason string
		fault  gcpfake.ErrorFault
		want   backend.Class
	}{
		"Forbidden":      {"IAM denies: fix the credentials.", gcpfake.ErrorFault{Code: 403, Reason: "forbidden"}, backend.ClassPermanent},
		"Unauthorized":   {"Credentials not accepted.", gcpfake.ErrorFault{Code: 401}, backend.ClassPermanent},
		"RateLimit":      {"403 rateLimitExceeded passes.", gcpfake.ErrorFault{Code: 403, Reason: "rateLimitExceeded"}, backend.ClassTransient},
		"UserRateLimit":  {"403 userRateLimitExceeded passes.", gcpfake.ErrorFault{Code: 403, Reason: "userRateLimitExceeded"}, backend.ClassTransient},
		"QuotaExceeded":  {"403 quotaExceeded is Quota.", gcpfake.ErrorFault{Code: 403, Reason: "quotaExceeded"}, backend.ClassQuota},
		"TooMany":        {"429 passes.", gcpfake.ErrorFault{Code: 429}, backend.ClassTransient},
		"Internal":       {"500 passes.", gcpfake.ErrorFault{Code: 500}, backend.ClassTransient},
		"NotReady":       {"400 resourceNotReady passes.", gcpfake.ErrorFault{Code: 400, Reason: "resourceNotReady"}, backend.ClassTransient},
		"Invalid":        {"400 invalid needs a spec change.", gcpfake.ErrorFault{Code: 400, Reason: "invalid"}, backend.ClassPermanent},
		"InProgress":     {"409 operationInProgress passes.", gcpfake.ErrorFault{Code: 409, Reason: "operationInProgress"}, backend.ClassTransient},
		"ProjectMissing": {"A 404 on an insert is not 'the instance is gone'.", gcpfake.ErrorFault{Code: 404}, backend.ClassPermanent},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			tc.fault.Match = gcpfake.Match{Call: gcpfake.CallAddressesInsert}
			tc.fault.Times = 1
			e.fake.InjectError(tc.fault)
			err := e.b.Create(ctx(t), desired())
			if got := backend.ClassOf(err); got != tc.want {
				t.Errorf("%s\nCreate = %v, class %s, want %s", tc.reason, err, got, tc.want)
			}
		})
	}
}

func TestCallDeadline(t *testing.T) {
	e := newEnv(t)
	e.b.timeout = time.Second
	// The client retries a 503 on reads until its context ends: the call
	// deadline must end it, well before the client's own 600 s.
	e.fake.Storm(0, 0)
	start := time.Now()
	_, err := e.b.Observe(ctx(t), desired())
	if backend.ClassOf(err) != backend.ClassTransient || time.Since(start) > 20*time.Second {
		t.Errorf("Observe in a 503 storm = %v after %v, want a Transient error within the call deadline", err, time.Since(start))
	}
	if _, err := e.b.List(ctx(t)); backend.ClassOf(err) != backend.ClassTransient {
		t.Errorf("List in a 503 storm = %v, want it to fail as a whole, Transient", err)
	}
}
