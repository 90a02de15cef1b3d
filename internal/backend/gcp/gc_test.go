/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
)

// TestGarbageCollection runs the garbage collector against a project that
// two installations share, through the real compute client: only this
// installation's orphans go.
func TestGarbageCollection(t *testing.T) {
	e := newEnv(t)
	const (
		ours   = "provider-egressproxy-0b3c1e0e-5f3a-4c1e-9a57-1a2b3c4d5e6f"
		theirs = "provider-egressproxy-9d1e2f3a-7b6c-4d5e-8f90-a1b2c3d4e5f6"
		alive  = "6f0c2f7e-1d55-4c1b-9b7a-0000000000aa"
	)
	instance := func(name, uid, pi string) Desired {
		return desired(func(d *Desired) {
			d.Name = name
			d.Ownership = backend.Ownership{Owner: backend.Owner{UID: types.UID(uid), Namespace: "team-a", Name: name}, ProviderInstance: pi}
		})
	}
	orphan := instance("egp-orphan", "6f0c2f7e-1d55-4c1b-9b7a-000000000001", ours)
	booting := instance("egp-booting", "6f0c2f7e-1d55-4c1b-9b7a-000000000002", ours)
	live := instance("egp-live", alive, ours)
	foreign := instance("egp-foreign", "6f0c2f7e-1d55-4c1b-9b7a-000000000003", theirs)
	for _, d := range []Desired{orphan, booting, live, foreign} {
		if err := e.b.Create(ctx(t), d); err != nil {
			t.Fatalf("Create %s: %v", d.Name, err)
		}
	}
	if err := e.fake.SetInstanceStatus(testProject, testZone, orphan.Name, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	// A Create that stopped before the VM: an address and a firewall rule.
	halfway := instance("egp-halfway", "6f0c2f7e-1d55-4c1b-9b7a-000000000004", ours)
	s, err := resolve(halfway)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.ensureAddress(ctx(t), s, halfway); err != nil {
		t.Fatal(err)
	}
	if err := e.b.ensureFirewall(ctx(t), s, halfway); err != nil {
		t.Fatal(err)
	}
	// VMs GC must leave alone: one nobody labelled, and one named like our
	// orphan in another zone, of another installation.
	unlabelled := instance("egp-unlabelled", "", "")
	e.insertVM(t, testZone, unlabelled, nil)
	sameName := instance(orphan.Name, "6f0c2f7e-1d55-4c1b-9b7a-000000000005", theirs)
	e.insertVM(t, "us-central1-b", sameName, ownershipLabels(sameName.Ownership))

	// First with the default minimum age: everything is too young.
	if n, err := gceCollector(t, e.b, ours, alive, time.Hour).Collect(ctx(t)); err != nil || n != 0 {
		t.Fatalf("Collect with a 1h minimum age: want nothing deleted, got %d, %v", n, err)
	}
	// Delete returns without waiting for an operation: collect until our
	// orphans are gone, as the collector does every interval.
	c := gceCollector(t, e.b, ours, alive, 0)
	for range 5 {
		if _, err := c.Collect(ctx(t)); err != nil {
			t.Fatalf("Collect: %v", err)
		}
	}

	type vm struct{ zone, name string }
	got := map[vm]map[string]string{}
	for _, inst := range e.fake.Instances() {
		got[vm{lastSegment(inst.GetZone()), inst.GetName()}] = inst.GetLabels()
	}
	for _, d := range []Desired{orphan, booting} {
		if _, ok := got[vm{testZone, d.Name}]; ok {
			t.Errorf("VM %s of our orphan is left after GC", d.Name)
		}
	}
	for _, w := range []vm{{testZone, live.Name}, {testZone, foreign.Name}, {testZone, unlabelled.Name}, {"us-central1-b", orphan.Name}} {
		if _, ok := got[w]; !ok {
			t.Errorf("VM %s/%s was collected, but its owner lives or it is not ours", w.zone, w.name)
		}
	}
	if l := got[vm{"us-central1-b", orphan.Name}]; !ownedBy(l, sameName.Ownership) {
		t.Errorf("the other installation's VM named like our orphan lost its labels: %v", l)
	}

	firewalls := map[string]bool{}
	for _, fw := range e.fake.Firewalls() {
		firewalls[fw.GetName()] = true
	}
	for _, d := range []Desired{orphan, booting} {
		if firewalls[d.Name] {
			t.Errorf("firewall rule %s of our orphan is left after GC", d.Name)
		}
	}
	// List reports VMs: a Create that stopped before the VM leaves parts
	// the collector never sees, and so never deletes.
	for _, d := range []Desired{live, foreign, halfway} {
		if !firewalls[d.Name] {
			t.Errorf("firewall rule %s was collected", d.Name)
		}
	}
	// Without the spec the collector cannot tell whether an address was
	// to be retained, so it keeps every address.
	if n := len(e.fake.Addresses()); n != 5 {
		t.Errorf("want the 5 addresses kept, got %d", n)
	}
}

// insertVM inserts a VM like d's, with labels, through the real client.
func (e *env) insertVM(t *testing.T, zone string, d Desired, labels map[string]string) {
	t.Helper()
	d.Params.Zone = zone
	s, err := resolve(d)
	if err != nil {
		t.Fatal(err)
	}
	inst := buildInstance(testProject, s, d.Ownership, "", &computepb.Metadata{})
	inst.Labels = labels
	op, err := e.b.svc.instances.Insert(ctx(t), &computepb.InsertInstanceRequest{Project: testProject, Zone: zone, InstanceResource: inst})
	if err != nil {
		t.Fatalf("insert VM %s: %v", d.Name, err)
	}
	if err := op.Wait(ctx(t)); err != nil {
		t.Fatalf("insert VM %s: %v", d.Name, err)
	}
}

// gceCollector returns a garbage collector of instance over b, for a
// control plane whose only GCPProxy has the UID alive.
func gceCollector(t *testing.T, b *Backend, instance, alive string, minAge time.Duration) *proxy.Collector[v1alpha1.GCPProxyParameters, v1alpha1.GCPProxyObservation] {
	t.Helper()
	s := runtime.NewScheme()
	if err := registry.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&v1alpha1.GCPProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "egp-live", UID: types.UID(alive)}},
		&v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
	).Build()
	return proxy.NewCollector(proxy.CollectorConfig[v1alpha1.GCPProxyParameters, v1alpha1.GCPProxyObservation]{
		Backend: "gcp",
		Kube:    kube,
		NewBackend: func(context.Context, client.Client, proxy.Config) (backend.Backend[v1alpha1.GCPProxyParameters, v1alpha1.GCPProxyObservation], error) {
			return b, nil
		},
		NewOwners: func() client.ObjectList { return &v1alpha1.GCPProxyList{} },
		NewConfigs: func() (client.ObjectList, client.ObjectList) {
			return &v1alpha1.ProviderConfigList{}, &v1alpha1.ClusterProviderConfigList{}
		},
	}, proxy.Options{ProviderInstance: instance, GCMinAge: minAge, GCInterval: time.Minute})
}
