/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/dialer"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/dialer/dialertest"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/libvirtd"
)

// The fast suite runs the backend against the test:///default driver of a
// private libvirtd: real RPCs, XML parsing and error codes, in milliseconds.
// The test driver cannot upload, boots nothing and invents its addresses,
// so the seed's content, booting and DHCP are left to the QEMU suite.

const fastTimeout = 2 * time.Minute

// testDriver returns a backend on the test driver of a private daemon, and a
// client of its own for assertions (it also keeps the driver's state, which
// resets when the last connection closes).
func testDriver(t *testing.T, opts ...Option) (*Backend, *golibvirt.Libvirt) {
	t.Helper()
	d := libvirtd.Start(t)
	l := d.DialURI(t, "test")
	pools, _, err := l.ConnectListAllStoragePools(1, 0)
	if err != nil || len(pools) == 0 {
		t.Fatalf("test driver pools: %v, %v", pools, err)
	}
	base := `<volume><name>` + testBase + `</name><capacity unit='bytes'>1073741824</capacity><target><format type='qcow2'/></target></volume>`
	if _, err := l.StorageVolCreateXML(pools[0], base, 0); err != nil {
		t.Fatalf("cannot create the base volume: %v", err)
	}
	b, err := New(dialer.Target{URI: d.URI("test")}, append([]Option{WithPolicy(testPolicy)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, l
}

// parts returns the domains and volumes named after instance name.
func parts(t *testing.T, l *golibvirt.Libvirt, name string) (doms, vols []string) {
	t.Helper()
	ds, _, err := l.ConnectListAllDomains(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Name == name {
			doms = append(doms, d.Name)
		}
	}
	pools, _, err := l.ConnectListAllStoragePools(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pools {
		vs, _, err := l.StoragePoolListAllVolumes(p, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if strings.HasPrefix(v.Name, name) {
				vols = append(vols, v.Name)
			}
		}
	}
	sort.Strings(vols)
	return doms, vols
}

func wantParts(t *testing.T, l *golibvirt.Libvirt, name string, domains int) {
	t.Helper()
	doms, vols := parts(t, l, name)
	var wantDoms, wantVols []string
	if domains > 0 {
		wantDoms, wantVols = []string{name}, []string{overlayName(name), seedName(name)}
		sort.Strings(wantVols)
	}
	if diff := cmp.Diff(wantDoms, doms); diff != "" {
		t.Errorf("domains of %s: -want, +got:\n%s", name, diff)
	}
	if diff := cmp.Diff(wantVols, vols); diff != "" {
		t.Errorf("volumes of %s: -want, +got:\n%s", name, diff)
	}
}

func TestTestDriverLifecycle(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	b, l := testDriver(t, WithClock(func() time.Time { return now }))
	ctx, cancel := context.WithTimeout(context.Background(), fastTimeout)
	defer cancel()
	d := desired()

	if _, err := b.Observe(ctx, d); !backend.IsNotFound(err) {
		t.Fatalf("Observe before Create: want NotFound, got %v", err)
	}
	if err := b.Create(ctx, d); err != nil {
		t.Fatalf("Create: %v", err)
	}
	wantParts(t, l, d.Name, 1)
	o, err := b.Observe(ctx, d)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	// The test driver hands out its fake address whatever the MAC.
	if o.State != commonv1alpha1.StateRunning || !o.UpToDate || o.CreatedAt != now || o.Ownership != d.Ownership {
		t.Errorf("Observe: got %+v", o)
	}
	if o.ID != FormatInstanceID(testPool, d.Name) || o.Extra.MACAddress != MACAddress(testUID) {
		t.Errorf("Observe: ID %q, MAC %q", o.ID, o.Extra.MACAddress)
	}
	if err := b.Create(ctx, d); err != nil {
		t.Fatalf("second Create: %v", err)
	}
	wantParts(t, l, d.Name, 1)
	list, err := b.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != d.Name || list[0].Ownership != d.Ownership {
		t.Errorf("List: got %+v, %v", list, err)
	}
	for i := range 2 {
		if err := b.Delete(ctx, deleteOnly(d)); err != nil {
			t.Fatalf("Delete #%d: %v", i+1, err)
		}
	}
	wantParts(t, l, d.Name, 0)
	if _, err := b.Observe(ctx, d); !backend.IsNotFound(err) {
		t.Errorf("Observe after Delete: want NotFound, got %v", err)
	}
}

func TestTestDriverCrashAfterEachStep(t *testing.T) {
	b, l := testDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), fastTimeout)
	defer cancel()
	crash := errors.New("simulated crash")
	for i, step := range []string{StepClaim, StepOverlay, StepSeed, StepDefine, StepStart} {
		t.Run(step, func(t *testing.T) {
			d := desired(withOwnerUID("crash-" + step))
			b.afterStep = func(s string) error {
				if s == step {
					return crash
				}
				return nil
			}
			if err := b.Create(ctx, d); !errors.Is(err, crash) {
				t.Fatalf("Create with a crash after step %d (%s): want the crash, got %v", i+1, step, err)
			}
			b.afterStep = nil
			if err := b.Create(ctx, d); err != nil {
				t.Fatalf("Create after the crash: %v", err)
			}
			wantParts(t, l, d.Name, 1)
			o, err := b.Observe(ctx, d)
			if err != nil || o.State != commonv1alpha1.StateRunning || !o.UpToDate {
				t.Errorf("Observe after recovery: %+v, %v", o, err)
			}
			if err := b.Delete(ctx, d); err != nil {
				t.Fatal(err)
			}
			wantParts(t, l, d.Name, 0)
		})
	}
}

func TestTestDriverReplace(t *testing.T) {
	b, l := testDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), fastTimeout)
	defer cancel()
	d := desired()
	if err := b.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	dom, err := l.DomainLookupByName(d.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.DomainDestroyFlags(dom, 0); err != nil {
		t.Fatal(err)
	}
	o, err := b.Observe(ctx, d)
	if err != nil || o.State != commonv1alpha1.StateStopped || o.Ready {
		t.Fatalf("Observe of a shut off domain: %+v, %v", o, err)
	}
	if err := b.Update(ctx, d); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if _, err := b.Observe(ctx, d); !backend.IsNotFound(err) {
		t.Fatalf("Observe after replacing: want NotFound, got %v", err)
	}
	if err := b.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	if o, err := b.Observe(ctx, d); err != nil || o.Extra.MACAddress != MACAddress(testUID) {
		t.Errorf("re-created VM: %+v, %v", o, err)
	}

	changed := desired(withDestinations(".example.org"))
	if o, err := b.Observe(ctx, changed); err != nil || o.UpToDate || !strings.Contains(o.Diff, "config checksum") {
		t.Errorf("Observe with a new allowlist: want a config checksum diff, got %+v, %v", o, err)
	}
	if err := b.Update(ctx, changed); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Observe(ctx, changed); !backend.IsNotFound(err) {
		t.Errorf("Observe after a config change: want NotFound (replaced), got %v", err)
	}
	wantParts(t, l, d.Name, 0)
}

func TestTestDriverOwnership(t *testing.T) {
	b, l := testDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), fastTimeout)
	defer cancel()
	d := desired()
	if err := b.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	other := desired(withProviderInstance("another-provider"))
	for name, err := range map[string]error{
		"Observe": func() error { _, err := b.Observe(ctx, other); return err }(),
		"Create":  b.Create(ctx, other),
		"Update":  b.Update(ctx, other),
		"Delete":  b.Delete(ctx, other),
	} {
		if backend.ClassOf(err) != backend.ClassPermanent {
			t.Errorf("%s of another owner's domain: want Permanent, got %v", name, err)
		}
	}
	wantParts(t, l, d.Name, 1)
	if err := b.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
}

func TestTestDriverUnknownAndMalformed(t *testing.T) {
	b, _ := testDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), fastTimeout)
	defer cancel()
	unknown := desired(withOwnerUID("nobody"))
	if _, err := b.Observe(ctx, unknown); !backend.IsNotFound(err) {
		t.Errorf("Observe of an unknown instance: want NotFound, got %v", err)
	}
	if err := b.Delete(ctx, deleteOnly(unknown)); err != nil {
		t.Errorf("Delete of an unknown instance: %v", err)
	}
	if err := b.Delete(ctx, desired(withName("a/b"))); backend.ClassOf(err) != backend.ClassPermanent {
		t.Errorf("Delete of a malformed name: want Permanent, got %v", err)
	}
	if _, _, err := ParseInstanceID("libvirt://only-one-part"); backend.ClassOf(err) != backend.ClassPermanent {
		t.Errorf("ParseInstanceID of a malformed ID: want Permanent, got %v", err)
	}
	if err := b.Create(ctx, desired(withPool("no-such-pool"))); !backend.IsNotFound(err) {
		t.Errorf("Create in a missing pool: want NotFound, got %v", err)
	}
	if err := b.CheckHealth(ctx); err != nil {
		t.Errorf("CheckHealth: %v", err)
	}
}

// TestTestDriverGC runs what the garbage collector does (List, Collectable,
// Delete with name and ownership) on a host shared with others: only this
// provider instance's orphans go, complete or half created; another
// installation's domain, a foreign domain, and volumes without our domain,
// however they are named, stay.
func TestTestDriverGC(t *testing.T) {
	old := time.Now().Add(-2 * time.Hour)
	b, l := testDriver(t, WithClock(func() time.Time { return old }))
	ctx, cancel := context.WithTimeout(context.Background(), fastTimeout)
	defer cancel()
	pools, _, err := l.ConnectListAllStoragePools(1, 0)
	if err != nil {
		t.Fatal(err)
	}

	orphan := desired(withOwnerUID("orphan"))
	if err := b.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	half := desired(withOwnerUID("half"))
	crash := errors.New("crash")
	b.afterStep = func(s string) error {
		if s == StepOverlay {
			return crash
		}
		return nil
	}
	if err := b.Create(ctx, half); !errors.Is(err, crash) {
		t.Fatalf("Create: want the crash, got %v", err)
	}
	b.afterStep = nil
	otherInstall := desired(withOwnerUID("other-install"), withProviderInstance("other-install"))
	if err := b.Create(ctx, otherInstall); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DomainDefineXML(`<domain type='test'><name>someone-elses-vm</name><memory>1024</memory><os><type>hvm</type></os></domain>`); err != nil {
		t.Fatal(err)
	}
	// The volumes of an instance whose domain is gone (or that a person
	// made with the same names), and an unrelated one.
	unowned := desired(withOwnerUID("unowned"))
	foreignVols := []string{overlayName(unowned.Name), seedName(unowned.Name), "unrelated.qcow2"}
	for _, v := range foreignVols {
		if _, err := l.StorageVolCreateXML(pools[0], `<volume><name>`+v+`</name><capacity>1024</capacity></volume>`, 0); err != nil {
			t.Fatal(err)
		}
	}

	list, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var collected []string
	for _, in := range list {
		if !backend.Collectable(in, testInstance, func(types.UID) bool { return false }, time.Hour, time.Now()) {
			continue
		}
		collected = append(collected, in.Name)
		if err := b.Delete(ctx, Desired{Name: in.Name, Ownership: in.Ownership}); err != nil {
			t.Fatalf("Delete(%s): %v", in.Name, err)
		}
	}
	sort.Strings(collected)
	want := []string{half.Name, orphan.Name}
	sort.Strings(want)
	if diff := cmp.Diff(want, collected); diff != "" {
		t.Errorf("collected: -want, +got:\n%s", diff)
	}
	wantParts(t, l, orphan.Name, 0)
	wantParts(t, l, half.Name, 0)
	wantParts(t, l, otherInstall.Name, 1)
	if _, err := l.DomainLookupByName("someone-elses-vm"); err != nil {
		t.Errorf("a foreign domain was deleted: %v", err)
	}
	for _, v := range append(foreignVols, testBase) {
		if _, err := l.StorageVolLookupByName(pools[0], v); err != nil {
			t.Errorf("volume %s, not ours, was deleted: %v", v, err)
		}
	}
	// The same names without our domain are neither adopted nor deleted.
	if err := b.Create(ctx, unowned); backend.ClassOf(err) != backend.ClassPermanent {
		t.Errorf("Create over volumes that are not ours: want Permanent, got %v", err)
	}
	if err := b.Delete(ctx, unowned); err != nil {
		t.Errorf("Delete without our domain: %v", err)
	}
	for _, v := range foreignVols[:2] {
		if _, err := l.StorageVolLookupByName(pools[0], v); err != nil {
			t.Errorf("volume %s, not ours, was deleted: %v", v, err)
		}
	}
}

// TestTestDriverExternalName: a resource whose external name is "base"
// would have its overlay named like the base image. It is refused, and the
// base image survives every call.
func TestTestDriverExternalName(t *testing.T) {
	b, l := testDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), fastTimeout)
	defer cancel()
	d := desired(withName(strings.TrimSuffix(testBase, overlaySuffix)))
	for name, err := range map[string]error{
		"Observe": func() error { _, err := b.Observe(ctx, d); return err }(),
		"Create":  b.Create(ctx, d),
		"Update":  b.Update(ctx, d),
		"Delete":  b.Delete(ctx, d),
	} {
		if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(fmt.Sprint(err), "crossplane.io/external-name") {
			t.Errorf("%s with a foreign external name: want a Permanent error naming the annotation, got %v", name, err)
		}
	}
	pools, _, err := l.ConnectListAllStoragePools(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.StorageVolLookupByName(pools[0], testBase); err != nil {
		t.Errorf("the base image is gone: %v", err)
	}
}

// TestNonCanonicalProviderInstance: ownership read back from a domain must
// match the provider instance it was written for, whatever its spelling, or
// every proxy looks foreign, its VM leaks and its resource cannot be
// deleted.
func TestNonCanonicalProviderInstance(t *testing.T) {
	b, l := testDriver(t, WithClock(func() time.Time { return time.Now().Add(-2 * time.Hour) }))
	ctx, cancel := context.WithTimeout(context.Background(), fastTimeout)
	defer cancel()
	const instance = "Prod.EU"
	d := desired(withProviderInstance(instance))
	if err := b.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	if o, err := b.Observe(ctx, d); err != nil || o.State != commonv1alpha1.StateRunning {
		t.Fatalf("Observe: %+v, %v", o, err)
	}
	if err := b.Create(ctx, d); err != nil {
		t.Errorf("second Create: %v", err)
	}
	list, err := b.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("List: %+v, %v", list, err)
	}
	if !backend.Collectable(list[0], instance, func(types.UID) bool { return false }, time.Hour, time.Now()) {
		t.Errorf("an orphan of provider instance %q is not collectable by it: %+v", instance, list[0])
	}
	if err := b.Delete(ctx, d); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	wantParts(t, l, d.Name, 0)
	if _, err := b.Observe(ctx, d); !backend.IsNotFound(err) {
		t.Errorf("Observe after Delete: want NotFound, got %v", err)
	}
}

// TestTestDriverRemoteTransports drives the backend over qemu+ssh and
// qemu+tls style URIs (test+ssh, test+tls) through in-process SSH and TLS
// servers that forward to the private daemon's socket: real libvirt RPC over
// a verified SSH channel and a mutually authenticated TLS connection.
func TestTestDriverRemoteTransports(t *testing.T) {
	d := libvirtd.Start(t)
	l := d.DialURI(t, "test")
	pools, _, err := l.ConnectListAllStoragePools(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	base := `<volume><name>` + testBase + `</name><capacity unit='bytes'>1073741824</capacity><target><format type='qcow2'/></target></volume>`
	if _, err := l.StorageVolCreateXML(pools[0], base, 0); err != nil {
		t.Fatal(err)
	}
	ssh := dialertest.NewSSHServer(t, d.Socket)
	pki := dialertest.NewPKI(t)
	targets := map[string]dialer.Target{
		"SSH": {URI: "test+ssh://root@" + ssh.Addr + "/default", Credentials: dialer.Credentials{SSHPrivateKey: ssh.PrivateKey, KnownHosts: ssh.KnownHosts}},
		"TLS": {URI: "test+tls://" + dialertest.NewTLSServer(t, pki.Server, 1, d.Socket) + "/default",
			Credentials: dialer.Credentials{TLSCert: pki.ClientCert, TLSKey: pki.ClientKey, CACert: pki.CACert}},
	}
	for name, target := range targets {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), fastTimeout)
			defer cancel()
			b, err := New(target, WithPolicy(testPolicy))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close() //nolint:errcheck // Test.
			des := desired(withOwnerUID("remote-" + name))
			if err := b.Create(ctx, des); err != nil {
				t.Fatalf("Create: %v", err)
			}
			if o, err := b.Observe(ctx, des); err != nil || o.State != commonv1alpha1.StateRunning {
				t.Errorf("Observe: %+v, %v", o, err)
			}
			if err := b.Delete(ctx, des); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			wantParts(t, l, des.Name, 0)
		})
	}
}
