/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
)

// proxyN is the desired state of the i-th of several proxies.
func proxyN(i int) Desired {
	return desired(func(d *Desired) {
		d.Name = fmt.Sprintf("egp-team-a-web-%08d", i)
		d.Ownership.Owner.UID = types.UID(fmt.Sprintf("6f0c2f7e-1d55-4c1b-9b7a-%012d", i))
		d.Ownership.Owner.Name = fmt.Sprintf("web-%d", i)
	})
}

// poll observes every proxy once, as one poll of the reconciler does, and
// returns the calls it made.
func (e *env) poll(t *testing.T, ds []Desired) map[string]int {
	t.Helper()
	e.guestReports(t, GuestServing, "")
	e.fake.ResetCalls()
	for _, d := range ds {
		o, err := e.b.Observe(ctx(t), d)
		if err != nil || !o.Ready || !o.UpToDate {
			t.Fatalf("Observe %s: Ready %v, UpToDate %v (%s), %v", d.Name, o.Ready, o.UpToDate, o.Diff, err)
		}
	}
	return e.fake.CallCounts()
}

// convergeN makes n proxies and converges each.
func (e *env) convergeN(t *testing.T, n int) []Desired {
	t.Helper()
	ds := make([]Desired, n)
	for i := range ds {
		ds[i] = proxyN(i)
		e.converge(t, ds[i], 6)
	}
	return ds
}

func TestObserveCalls(t *testing.T) {
	const n = 3
	cases := map[string]struct {
		reason string
		opts   []Option
		// before runs after the proxies converged, before the poll.
		before func(*testing.T, *env, []Desired)
		want   map[string]int
	}{
		"ListsExpired": {
			reason: "Once the shared lists are older than the TTL, one poll lists each kind once, for every proxy, and reads each guest's report.",
			before: func(_ *testing.T, e *env, _ []Desired) { e.clock.advance(DefaultListTTL) },
			want: map[string]int{
				gcpfake.CallInstancesList: 1, gcpfake.CallAddressesList: 1, gcpfake.CallFirewallsList: 1,
				gcpfake.CallInstancesGuestAttrs: n,
			},
		},
		"Steady": {
			reason: "Within the TTL a poll makes one call per proxy: the guest's report.",
			before: func(t *testing.T, e *env, ds []Desired) {
				e.clock.advance(DefaultListTTL)
				e.poll(t, ds)
				e.clock.advance(DefaultListTTL / 2)
			},
			want: map[string]int{gcpfake.CallInstancesGuestAttrs: n},
		},
		"AfterAWrite": {
			reason: "A proxy that Update changed after the lists were made reads its parts with GETs: read-your-writes.",
			before: func(t *testing.T, e *env, ds []Desired) {
				e.clock.advance(DefaultListTTL)
				e.poll(t, ds)
				if err := e.b.Update(ctx(t), ds[0]); err != nil {
					t.Fatalf("Update: %v", err)
				}
			},
			want: map[string]int{
				gcpfake.CallInstancesGet: 1, gcpfake.CallAddressesGet: 1, gcpfake.CallFirewallsGet: 1,
				gcpfake.CallInstancesGuestAttrs: n,
			},
		},
		"ListsOff": {
			reason: "Without the lists every Observe reads the instance, the firewall rule, the address and the guest's report.",
			opts:   []Option{WithListTTL(0)},
			want: map[string]int{
				gcpfake.CallInstancesGet: n, gcpfake.CallAddressesGet: n, gcpfake.CallFirewallsGet: n,
				gcpfake.CallInstancesGuestAttrs: n,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			if tc.opts != nil {
				b, err := New(t.Context(), testProject, e.fake.ClientOptions(), append([]Option{WithCallTimeout(10 * time.Second), WithClock(e.clock.now)}, tc.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = b.Close() })
				e.b = b
			}
			ds := e.convergeN(t, n)
			if tc.before != nil {
				tc.before(t, e, ds)
			}
			if diff := cmp.Diff(tc.want, e.poll(t, ds)); diff != "" {
				t.Errorf("%s\ncalls of one poll of %d proxies: -want +got:\n%s", tc.reason, n, diff)
			}
		})
	}
}

func TestListedDriftRepaired(t *testing.T) {
	cases := map[string]struct {
		reason string
		drift  func(*testing.T, *env)
		diff   string
	}{
		"FirewallOpened": {
			reason: "A firewall rule opened to everyone is seen at the next list and patched back.",
			drift:  openFirewall,
			diff:   "firewall source ranges are [0.0.0.0/0]",
		},
		"InstanceDeleted": {
			reason: "An instance deleted behind the provider's back is missing from the next list, and a GET confirms it.",
			drift:  deleteInstance,
			diff:   "the instance is missing",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			d := desired()
			e.converge(t, d, 5)
			// The lists are made after the last write: the proxy is read
			// from them, as in steady state.
			e.clock.advance(DefaultListTTL)
			e.poll(t, []Desired{d})
			tc.drift(t, e)
			// The bound: a change the provider did not make is seen once
			// the lists it reads are older than the TTL.
			e.clock.advance(DefaultListTTL)
			o, err := e.b.Observe(ctx(t), d)
			if err != nil || o.UpToDate || !strings.Contains(o.Diff, tc.diff) {
				t.Fatalf("%s\nObserve a TTL after the drift = UpToDate %v, Diff %q, %v; want a diff containing %q", tc.reason, o.UpToDate, o.Diff, err, tc.diff)
			}
			// Repaired by the next reconcile, and seen so at once (GETs
			// after the write), without waiting for the next lists.
			e.converge(t, d, 8)
			if diff := cmp.Diff([]string{"10.0.0.0/8", "192.0.2.0/24"}, e.fake.Firewalls()[0].GetSourceRanges()); diff != "" {
				t.Errorf("%s\nfirewall source ranges: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestListsPerProviderConfig: each provider config has a backend of its
// own, and so lists of its own, made with its own credentials. A proxy of
// one config is never served from what another config listed, even in the
// same project.
func TestListsPerProviderConfig(t *testing.T) {
	e := newEnv(t)
	a := desired()
	e.converge(t, a, 5)
	e.clock.advance(DefaultListTTL)
	e.poll(t, []Desired{a})

	other, err := New(t.Context(), testProject, e.fake.ClientOptions(), WithCallTimeout(10*time.Second), WithClock(e.clock.now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	b := desired(func(d *Desired) {
		d.Ownership = backend.Ownership{Owner: backend.Owner{UID: "0b5e1c8d-5a8e-4c1b-9b7a-000000000002", Namespace: "team-b", Name: "web"}, ProviderInstance: "default"}
	})
	e.fake.ResetCalls()
	_, err = other.Observe(ctx(t), b)
	if !strings.Contains(fmt.Sprint(err), "refusing") {
		t.Errorf("another owner's Observe of team-a's proxy name: %v, want a refusal", err)
	}
	want := map[string]int{gcpfake.CallInstancesList: 1, gcpfake.CallAddressesList: 1, gcpfake.CallFirewallsList: 1}
	if diff := cmp.Diff(want, e.fake.CallCounts()); diff != "" {
		t.Errorf("another config's backend must list with its own credentials, not reuse the first's lists: -want +got:\n%s", diff)
	}
}

func TestSlim(t *testing.T) {
	item := func(k, v string) *computepb.Items {
		return &computepb.Items{Key: proto.String(k), Value: proto.String(v)}
	}
	cases := map[string]struct {
		reason string
		in     []*computepb.Items
		want   []*computepb.Items
	}{
		"LargeValuesDropped": {
			reason: "The user-data and the startup-script, only checked for presence, are not kept; what Observe compares is.",
			in:     []*computepb.Items{item(MetadataUserData, "#cloud-config ..."), item(MetadataStartupScript, "#!/bin/bash ..."), item(MetadataConfigChecksum, "abc"), item(MetadataHtpasswd, "u:$2y$...")},
			want:   []*computepb.Items{item(MetadataUserData, listedValue), item(MetadataStartupScript, listedValue), item(MetadataConfigChecksum, "abc"), item(MetadataHtpasswd, "u:$2y$...")},
		},
		"MissingStaysMissing": {
			reason: "An empty user-data stays empty, so that Observe still reports it missing.",
			in:     []*computepb.Items{item(MetadataUserData, "")},
			want:   []*computepb.Items{item(MetadataUserData, "")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inst := &computepb.Instance{Metadata: &computepb.Metadata{Items: tc.in}}
			slim(inst)
			if diff := cmp.Diff(tc.want, inst.GetMetadata().GetItems(), protocmp.Transform()); diff != "" {
				t.Errorf("%s\nslim: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestConcurrentObservesShareLists: Observes that find the lists expired at
// the same time wait for one list call of each kind.
func TestConcurrentObservesShareLists(t *testing.T) {
	const n = 4
	e := newEnv(t)
	ds := e.convergeN(t, n)
	e.clock.advance(DefaultListTTL)
	e.guestReports(t, GuestServing, "")
	e.fake.ResetCalls()
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o, err := e.b.Observe(ctx(t), d); err != nil || !o.Ready || !o.UpToDate {
				t.Errorf("Observe %s: Ready %v, UpToDate %v (%s), %v", d.Name, o.Ready, o.UpToDate, o.Diff, err)
			}
		}()
	}
	wg.Wait()
	want := map[string]int{
		gcpfake.CallInstancesList: 1, gcpfake.CallAddressesList: 1, gcpfake.CallFirewallsList: 1,
		gcpfake.CallInstancesGuestAttrs: n,
	}
	if diff := cmp.Diff(want, e.fake.CallCounts()); diff != "" {
		t.Errorf("calls of %d concurrent Observes: -want +got:\n%s", n, diff)
	}
}

// TestCreateCalls counts what Create of a new proxy sends: each part is
// read once before its insert (a crashed Create finishes its work), and
// the read that checks a done insert (a stale request ID replays an old
// operation) is the read of the new part: no second GET of the address
// and the firewall rule (issue 13: ~5 GETs of each per new proxy).
func TestCreateCalls(t *testing.T) {
	e := newEnv(t)
	e.fake.ResetCalls()
	if err := e.b.Create(ctx(t), proxyN(0)); err != nil {
		t.Fatal(err)
	}
	got := e.fake.CallCounts()
	for _, c := range []string{gcpfake.CallAddressesGet, gcpfake.CallFirewallsGet} {
		if got[c] > 2 {
			t.Errorf("%s: %d calls for one new proxy, want at most 2 (one before the insert, one to check it)\nall calls: %v", c, got[c], got)
		}
	}
}

// TestFailedListShared shows a failed list answering every Observe that
// needs it for failedListTTL: under a storm the proxies do not each ask
// for it again. (A 403 here: the compute client retries a 503 itself, which
// would blur the count; the sharing is the same for any error.)
func TestFailedListShared(t *testing.T) {
	const n = 3
	e := newEnv(t)
	ds := e.convergeN(t, n)
	e.clock.advance(DefaultListTTL)
	e.fake.InjectError(gcpfake.ErrorFault{Match: gcpfake.Match{Call: gcpfake.CallInstancesList}, Code: 403, Reason: "forbidden"})
	observeAll := func() int {
		e.fake.ResetCalls()
		for _, d := range ds {
			if _, err := e.b.Observe(ctx(t), d); err == nil {
				t.Fatalf("Observe %s: no error while instances.list fails", d.Name)
			}
		}
		return e.fake.CallCounts()[gcpfake.CallInstancesList]
	}
	if got := observeAll(); got != 1 {
		t.Errorf("%d Observes while the list fails: %d list calls, want 1", n, got)
	}
	e.clock.advance(failedListTTL)
	if got := observeAll(); got != 1 {
		t.Errorf("%d Observes %s later: %d list calls, want 1 (the failure is asked again)", n, failedListTTL, got)
	}
	e.fake.ClearFaults()
	e.clock.advance(failedListTTL)
	if got := e.poll(t, ds)[gcpfake.CallInstancesList]; got != 1 {
		t.Errorf("after the fault: %d list calls, want 1", got)
	}
}
