/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"
	"sync"
	"testing"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

var (
	_ backend.Backend[v1alpha1.GCPProxyParameters, v1alpha1.GCPProxyObservation] = &Backend{}
	_ backend.HealthChecker                                                      = &Backend{}
)

const (
	testProject = "test-project"
	testZone    = "us-central1-a"
	testRegion  = "us-central1"
	testName    = "egp-team-a-web-1a2b3c4d"
	testUID     = "6f0c2f7e-1d55-4c1b-9b7a-2b1f3c4d5e6f"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is a fake GCE and a backend talking to it through the real clients.
type env struct {
	fake  *gcpfake.Server
	b     *Backend
	clock *clock
}

func newEnv(t *testing.T, opts ...gcpfake.Option) *env {
	t.Helper()
	e := &env{fake: gcpfake.NewTestServer(t, opts...), clock: newClock()}
	b, err := New(t.Context(), testProject, e.fake.ClientOptions(), WithCallTimeout(10*time.Second), WithClock(e.clock.now))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	e.b = b
	return e
}

func ownership(uid string) backend.Ownership {
	return backend.Ownership{Owner: backend.Owner{UID: types.UID(uid), Namespace: "team-a", Name: "web"}, ProviderInstance: "default"}
}

func desired(mods ...func(*Desired)) Desired {
	d := Desired{
		Name:      testName,
		Ownership: ownership(testUID),
		Proxy: commonv1alpha1.ProxyParameters{
			Port:                3128,
			AllowedClientCIDRs:  []string{"10.0.0.0/8", "192.0.2.0/24"},
			AllowedDestinations: []string{"api.example.com", ".googleapis.com"},
			AllowedConnectPorts: []int32{443},
		},
		Credentials: backend.Credentials{Username: "team-a", Password: "s3cret"},
		Params:      v1alpha1.GCPProxyParameters{Zone: testZone, Labels: map[string]v1alpha1.LabelValue{"team": "a"}},
	}
	for _, m := range mods {
		m(&d)
	}
	return d
}

// mustSpec resolves d.
func mustSpec(t *testing.T, d Desired) spec {
	t.Helper()
	s, err := resolve(d)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mustSum is the checksum of the squid configuration d asks for.
func mustSum(t *testing.T, d Desired) string {
	t.Helper()
	conf, err := squid.Render(vmSquidConfig(d))
	if err != nil {
		t.Fatal(err)
	}
	return squid.Checksum(conf)
}

// ctx is a context bounded well below the test timeout.
func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// untilReady observes until the proxy is ready, at most n times (the fake
// boots a VM over a few observations).
func (e *env) untilReady(t *testing.T, d Desired, n int) Observation {
	t.Helper()
	var o Observation
	var err error
	for range n {
		e.guestReports(t, GuestServing, "")
		if o, err = e.b.Observe(ctx(t), d); err == nil && o.Ready {
			return o
		}
	}
	t.Fatalf("not ready after %d observations: %+v, %v", n, o, err)
	return o
}

// guestReports stands in for the guest of every running instance that lets
// its guest write guest attributes: it reports state for the configuration
// in the instance's metadata, at the test clock's now.
func (e *env) guestReports(t *testing.T, state, reason string) {
	t.Helper()
	for _, inst := range e.fake.Instances() {
		if inst.GetStatus() != "RUNNING" || metadataValue(inst, MetadataEnableGuestAttributes) != "TRUE" {
			continue
		}
		sum := metadataValue(inst, MetadataConfigChecksum)
		v := GuestReport(state, sum, e.clock.now(), reason)
		if err := e.fake.SetGuestAttribute(testProject, lastSegment(inst.GetZone()), inst.GetName(), GuestAttributePath, v); err != nil {
			t.Fatalf("the guest cannot report: %v", err)
		}
		// The watcher applied what the metadata holds.
		applied := GuestReport(GuestApplied, AppliedConfig(sum, metadataValue(inst, MetadataHtpasswd)), e.clock.now(), "")
		if err := e.fake.SetGuestAttribute(testProject, lastSegment(inst.GetZone()), inst.GetName(), GuestApplyPath, applied); err != nil {
			t.Fatalf("the guest cannot report: %v", err)
		}
	}
}

// deleteAll runs Delete and Observe like the reconciler does while deleting,
// until Observe reports NotFound, at most n rounds.
func (e *env) deleteAll(t *testing.T, d Desired, n int) {
	t.Helper()
	for range n {
		_, err := e.b.Observe(ctx(t), d)
		if backend.IsNotFound(err) {
			return
		}
		if err := e.b.Delete(ctx(t), d); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	t.Fatalf("the proxy is not gone after %d delete rounds", n)
}

// rawAddresses is a client of the fake that changes things behind the
// backend's back.
func rawAddresses(t *testing.T, f *gcpfake.Server) *compute.AddressesClient {
	t.Helper()
	c, err := compute.NewAddressesRESTClient(t.Context(), f.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func rawInstances(t *testing.T, f *gcpfake.Server) *compute.InstancesClient {
	t.Helper()
	c, err := compute.NewInstancesRESTClient(t.Context(), f.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func rawFirewalls(t *testing.T, f *gcpfake.Server) *compute.FirewallsClient {
	t.Helper()
	c, err := compute.NewFirewallsRESTClient(t.Context(), f.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waited returns a function that fails t unless a call that started an
// operation, and the operation, succeeded: waited(t)(client.Insert(...)).
func waited(t *testing.T) func(*compute.Operation, error) {
	return func(op *compute.Operation, err error) {
		t.Helper()
		if err == nil {
			err = op.Wait(ctx(t))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Drifts of the proxy's parts, made behind the backend's back.

// openFirewall opens the proxy's firewall rule to everyone.
func openFirewall(t *testing.T, e *env) {
	t.Helper()
	waited(t)(rawFirewalls(t, e.fake).Patch(ctx(t), &computepb.PatchFirewallRequest{
		Project: testProject, Firewall: testName,
		FirewallResource: &computepb.Firewall{SourceRanges: []string{"0.0.0.0/0"}},
	}))
}

// deleteFirewall deletes the proxy's firewall rule.
func deleteFirewall(t *testing.T, e *env) {
	t.Helper()
	waited(t)(rawFirewalls(t, e.fake).Delete(ctx(t), &computepb.DeleteFirewallRequest{Project: testProject, Firewall: testName}))
}

// deleteInstance deletes the proxy's instance.
func deleteInstance(t *testing.T, e *env) {
	t.Helper()
	waited(t)(rawInstances(t, e.fake).Delete(ctx(t), &computepb.DeleteInstanceRequest{Project: testProject, Zone: testZone, Instance: testName}))
}

// reserve reserves an address with the given labels, as someone else would.
func reserve(t *testing.T, f *gcpfake.Server, name string, labels map[string]string) string {
	t.Helper()
	waited(t)(rawAddresses(t, f).Insert(ctx(t), &computepb.InsertAddressRequest{
		Project: testProject, Region: testRegion,
		AddressResource: &computepb.Address{Name: proto.String(name), Labels: labels},
	}))
	for _, a := range f.Addresses() {
		if a.GetName() == name {
			return a.GetAddress()
		}
	}
	t.Fatalf("address %s was not reserved", name)
	return ""
}

func addressIP(t *testing.T, f *gcpfake.Server, name string) string {
	t.Helper()
	for _, a := range f.Addresses() {
		if a.GetName() == name {
			return a.GetAddress()
		}
	}
	return ""
}
