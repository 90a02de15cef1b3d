/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// TestUserAddress attaches the addresses a user may name, and checks that
// Delete leaves them behind, still claimed: the provider did not make them,
// and another team must not send from this team's egress IP after it.
func TestUserAddress(t *testing.T) {
	cases := map[string]struct {
		reason string
		opts   []Option
		labels map[string]string
	}{
		"PlatformReserved": {
			reason: "An address without ownership labels that the config lists was reserved by the platform team: it may be claimed and attached.",
			opts:   []Option{WithPolicy(defaultConfigName, v1alpha1.GCPPolicy{Addresses: []string{"team-a-ip"}})},
			labels: map[string]string{"team": "a"},
		},
		"Ours": {
			reason: "An address with this proxy's own ownership labels is ours to attach, listed or not.",
			labels: ownershipLabels(ownership(testUID)),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			for _, o := range tc.opts {
				o(e.b)
			}
			ip := reserve(t, e.fake, "team-a-ip", tc.labels)
			d := desired(func(d *Desired) { d.Params.Address = &v1alpha1.GCPAddress{Name: proto.String("team-a-ip")} })
			if err := e.b.Create(ctx(t), d); err != nil {
				t.Fatalf("%s\nCreate: %v", tc.reason, err)
			}
			if o := e.untilReady(t, d, 5); !cmp.Equal(o.EgressIPs, []string{ip}) || !o.UpToDate {
				t.Errorf("%s\nObserve = %+v; want up to date with egress IP %s", tc.reason, o, ip)
			}
			e.deleteAll(t, d, 8)
			addrs := e.fake.Addresses()
			if len(addrs) != 1 || addrs[0].GetName() != "team-a-ip" {
				t.Fatalf("Delete must never delete a user-named address; addresses left: %v", addrs)
			}
			want := instanceLabels(tc.labels, ownership(testUID))
			if diff := cmp.Diff(want, addrs[0].GetLabels()); diff != "" {
				t.Errorf("Delete must leave a user-named address claimed: labels -want +got:\n%s", diff)
			}
		})
	}
}

// TestUserAddressNotListed refuses an address without ownership labels that
// the provider config does not list: the platform hands those out.
func TestUserAddressNotListed(t *testing.T) {
	e := newEnv(t)
	WithPolicy(defaultConfigName, v1alpha1.GCPPolicy{Addresses: []string{"other-ip"}})(e.b)
	reserve(t, e.fake, "team-a-ip", nil)
	d := desired(func(d *Desired) { d.Params.Address = &v1alpha1.GCPAddress{Name: proto.String("team-a-ip")} })
	err := e.b.Create(ctx(t), d)
	want := backend.Permanent(errors.Errorf(errFmtAddressNotListed, "team-a-ip", defaultConfigName))
	if diff := cmp.Diff(want, err, test.EquateErrors()); diff != "" {
		t.Errorf("Create: -want +got:\n%s", diff)
	}
	if a := e.fake.Addresses(); len(a) != 1 || len(a[0].GetLabels()) != 0 {
		t.Errorf("a refused address must stay unlabelled: %v", a)
	}
}

// TestAddressTakeover is two teams, each with its own namespace, proxy and
// provider config, both reaching the same project and both listing the
// same platform address. Team A attaches it first; team B may never take
// it: not while A's VM uses it, not while A's VM is replaced (the address
// is RESERVED, with no user), and no refusal names A's instance.
func TestAddressTakeover(t *testing.T) {
	e := newEnv(t)
	WithPolicy("ClusterProviderConfig team-a", v1alpha1.GCPPolicy{Addresses: []string{"shared-ip"}})(e.b)
	teamB, err := New(t.Context(), testProject, e.fake.ClientOptions(), WithCallTimeout(10*time.Second), WithClock(e.clock.now),
		WithPolicy("ProviderConfig team-b/gcp", v1alpha1.GCPPolicy{Addresses: []string{"shared-ip"}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = teamB.Close() })
	ip := reserve(t, e.fake, "shared-ip", nil)
	shared := &v1alpha1.GCPAddress{Name: proto.String("shared-ip")}
	a := desired(func(d *Desired) { d.Params.Address = shared })
	b := desired(func(d *Desired) {
		d.Name = "egp-team-b-web-5e6f7a8b"
		d.Ownership = backend.Ownership{Owner: backend.Owner{UID: "0b0b0b0b-1111-2222-3333-444444444444", Namespace: "team-b", Name: "web"}, ProviderInstance: "default"}
		d.Params.Address = shared
	})
	refused := func(when string) {
		t.Helper()
		err := teamB.Create(ctx(t), b)
		if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), "spec.forProvider.address.name") {
			t.Errorf("%s: team B's Create = %v (class %s), want Permanent naming spec.forProvider.address.name", when, err, backend.ClassOf(err))
		}
		if err != nil && (strings.Contains(err.Error(), "instances/") || strings.Contains(err.Error(), a.Name)) {
			t.Errorf("%s: the refusal names team A's instance: %v", when, err)
		}
		if _, ok := e.fake.Instance(testProject, testZone, b.Name); ok {
			t.Errorf("%s: team B got an instance", when)
		}
	}

	if err := e.b.Create(ctx(t), a); err != nil {
		t.Fatalf("team A's Create: %v", err)
	}
	if o := e.untilReady(t, a, 5); !cmp.Equal(o.EgressIPs, []string{ip}) {
		t.Fatalf("team A egress IPs = %v, want %s", o.EgressIPs, ip)
	}
	refused("while team A's VM uses the address")

	// A machine type change replaces team A's VM: Update deletes it, and
	// the next reconcile makes it again. In between the address has no
	// user.
	rotated := a
	rotated.Params.MachineType = "e2-medium"
	if err := e.b.Update(ctx(t), rotated); err != nil {
		t.Fatalf("team A's Update: %v", err)
	}
	for range 5 {
		inst, err := e.b.getInstance(ctx(t), testZone, a.Name)
		if err != nil {
			t.Fatal(err)
		}
		if inst == nil {
			break
		}
	}
	addr := e.fake.Addresses()[0]
	if addr.GetStatus() != "RESERVED" {
		t.Fatalf("during the replacement the address is %s, want RESERVED", addr.GetStatus())
	}
	if !ownedBy(addr.GetLabels(), a.Ownership) {
		t.Errorf("during the replacement the address has labels %v, want team A's claim", addr.GetLabels())
	}
	refused("while team A's VM is replaced")

	if err := e.b.Update(ctx(t), rotated); err != nil {
		t.Fatalf("team A's Update after the replacement: %v", err)
	}
	if o := e.untilReady(t, rotated, 5); !cmp.Equal(o.EgressIPs, []string{ip}) {
		t.Errorf("team A egress IPs after the replacement = %v, want %s", o.EgressIPs, ip)
	}
	refused("after team A's VM is back")
}

func TestCheckServiceAccount(t *testing.T) {
	const sa = "proxy@test-project.iam.gserviceaccount.com"
	cases := map[string]struct {
		reason string
		opts   []Option
		sa     string
		want   error
	}{
		"NoneAsked": {
			reason: "A VM without a service account needs no allowance.",
		},
		"NoAllowlist": {
			reason: "Without an allowlist no service account may be attached.",
			sa:     sa,
			want:   backend.Permanent(errors.Errorf(errFmtSANotAllowed, sa, defaultConfigName)),
		},
		"EmptyAllowlist": {
			reason: "An empty allowlist allows none, and the error names the config.",
			opts:   []Option{WithAllowedServiceAccounts("ClusterProviderConfig gcp")},
			sa:     sa,
			want:   backend.Permanent(errors.Errorf(errFmtSANotAllowed, sa, "ClusterProviderConfig gcp")),
		},
		"NotListed": {
			reason: "Only exact entries allow: another account of the same project is refused.",
			opts:   []Option{WithAllowedServiceAccounts("ProviderConfig team-a/gcp", "other@test-project.iam.gserviceaccount.com")},
			sa:     sa,
			want:   backend.Permanent(errors.Errorf(errFmtSANotAllowed, sa, "ProviderConfig team-a/gcp")),
		},
		"Listed": {
			reason: "A listed account may be attached.",
			opts:   []Option{WithAllowedServiceAccounts("ProviderConfig team-a/gcp", "other@test-project.iam.gserviceaccount.com", sa)},
			sa:     sa,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := newBackend(testProject, &services{}, tc.opts...)
			err := b.checkServiceAccount(spec{sa: tc.sa})
			if diff := cmp.Diff(tc.want, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\ncheckServiceAccount: -want +got:\n%s", tc.reason, diff)
			}
			if err != nil && !strings.Contains(err.Error(), "spec.forProvider.serviceAccountEmail") {
				t.Errorf("%s\nthe error must name the field: %v", tc.reason, err)
			}
		})
	}
}

// TestServiceAccountAllowlist drives the allowlist through the fake: a
// refused account creates nothing, an allowed one runs with narrow scopes,
// and one the config stops allowing shows as drift that Update refuses.
func TestServiceAccountAllowlist(t *testing.T) {
	const sa = "proxy@test-project.iam.gserviceaccount.com"
	e := newEnv(t)
	d := desired(func(d *Desired) { d.Params.ServiceAccountEmail = proto.String(sa) })

	err := e.b.Create(ctx(t), d)
	if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), "spec.forProvider.serviceAccountEmail "+sa) {
		t.Fatalf("Create with a service account the config does not allow = %v (class %s), want Permanent naming the field", err, backend.ClassOf(err))
	}
	if n := len(e.fake.Instances()) + len(e.fake.Addresses()) + len(e.fake.Firewalls()); n != 0 {
		t.Fatalf("a refused Create must create nothing, %d resources exist", n)
	}

	WithAllowedServiceAccounts("ProviderConfig team-a/gcp", sa)(e.b)
	if err := e.b.Create(ctx(t), d); err != nil {
		t.Fatalf("Create with an allowed service account: %v", err)
	}
	if o := e.untilReady(t, d, 5); !o.UpToDate {
		t.Errorf("Observe: want up to date, got diff %q", o.Diff)
	}
	insts := e.fake.Instances()
	if len(insts) != 1 {
		t.Fatalf("want one instance, got %d", len(insts))
	}
	want := []string{"https://www.googleapis.com/auth/logging.write", "https://www.googleapis.com/auth/monitoring.write"}
	if got := insts[0].GetServiceAccounts(); len(got) != 1 || got[0].GetEmail() != sa || !cmp.Equal(sortedSet(got[0].GetScopes()), want) {
		t.Errorf("instance service accounts = %v; want %s with scopes %v only", got, sa, want)
	}

	WithAllowedServiceAccounts("ProviderConfig team-a/gcp")(e.b)
	// The connector refuses the resource before any backend call; Observe,
	// which a resource being deleted still needs, reports the VM as it is.
	o, err := e.b.Observe(ctx(t), d)
	if err != nil || strings.Contains(o.Diff, "spec.allowedServiceAccounts") {
		t.Errorf("Observe once the config no longer allows the account = %+v, %v; want it found, the policy left to the connector", o, err)
	}
	if err := e.b.Update(ctx(t), d); backend.ClassOf(err) != backend.ClassPermanent {
		t.Errorf("Update once the config no longer allows the account = %v, want Permanent", err)
	}
	e.deleteAll(t, d, 8)
}

// TestUserAddressAttachedBeforeTheCheck shows a VM that already sends from
// another proxy's address (made before addresses were checked) as drift,
// and Update refuses it, naming the field.
func TestUserAddressAttachedBeforeTheCheck(t *testing.T) {
	e := newEnv(t)
	ip := reserve(t, e.fake, "team-b-ip", ownershipLabels(ownership("11111111-2222-3333-4444-555555555555")))
	d := desired(func(d *Desired) { d.Params.Address = &v1alpha1.GCPAddress{Name: proto.String("team-b-ip")} })
	s, err := resolve(d)
	if err != nil {
		t.Fatal(err)
	}
	// What Create did before it checked the address's labels.
	if err := e.b.ensureFirewall(ctx(t), s, d); err != nil {
		t.Fatal(err)
	}
	if err := e.b.ensureInstance(ctx(t), s, d, ip); err != nil {
		t.Fatal(err)
	}

	var o Observation
	for range 5 {
		if o, err = e.b.Observe(ctx(t), d); err != nil {
			t.Fatalf("Observe: %v", err)
		}
	}
	if o.UpToDate || !strings.Contains(o.Diff, "address team-b-ip is not ours") {
		t.Errorf("Observe = %+v; want not up to date, saying the address is not ours", o)
	}
	err = e.b.Update(ctx(t), d)
	if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), "spec.forProvider.address.name: address team-b-ip carries the ownership labels of another") {
		t.Errorf("Update = %v (class %s), want a Permanent error naming spec.forProvider.address.name", err, backend.ClassOf(err))
	}
	e.deleteAll(t, d, 8)
	if a := e.fake.Addresses(); len(a) != 1 || a[0].GetName() != "team-b-ip" {
		t.Errorf("Delete must leave the other proxy's address alone, addresses: %v", a)
	}
}
