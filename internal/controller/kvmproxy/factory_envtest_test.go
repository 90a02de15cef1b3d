/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvmproxy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/controller/config"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/libvirtd"
)

// This suite runs the whole KVMProxy controller (managed reconciler,
// connector, factory, libvirt backend) on a real kube-apiserver against the
// test:///default driver of a private libvirtd: fast, but nothing boots.

// Replacement goes through the managed reconciler's creation grace period
// (30 s) and its per-item backoff, which grows with every requeue on the
// way; on a loaded 2-core machine that can take minutes.
const envtestTimeout = 4 * time.Minute

func startKVMProvider(t *testing.T, e *kube.Env) {
	t.Helper()
	ctrl.SetLogger(logr.Discard())
	e.RunManager(t, func(mgr ctrl.Manager, o controller.Options) error {
		if err := config.Setup(mgr, o); err != nil {
			return err
		}
		return Controller.Setup(mgr, proxy.Options{Options: o, ProviderInstance: "envtest", CredentialsKey: []byte("a test key of thirty-two bytes.."), Timeout: time.Minute}, NewFactory())
	})
}

func kvmProxy(namespace, config string) *v1alpha1.KVMProxy {
	return &v1alpha1.KVMProxy{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "proxy"},
		Spec: v1alpha1.KVMProxySpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{
				ProviderConfigReference:          &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: config},
				WriteConnectionSecretToReference: &xpv2.LocalSecretReference{Name: "proxy-conn"},
			},
			ForProvider: v1alpha1.KVMProxyParameters{
				ProxyParameters: commonv1alpha1.ProxyParameters{AllowedClientCIDRs: []string{"10.0.0.0/8"}, AllowedDestinations: []string{".example.com"}},
				Pool:            "default-pool",
				BaseImageVolume: "base.qcow2",
				DiskGiB:         1,
				MemoryMiB:       256,
				DomainType:      "qemu",
			},
		},
	}
}

// testDriverConfig is a ClusterProviderConfig of the test driver whose
// policy allows its pool.
func testDriverConfig(name, socket string) *v1alpha1.ClusterProviderConfig {
	return &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ProviderConfigSpec{URI: "test:///default", SocketPath: ptr.To(socket),
			Credentials: v1alpha1.Credentials{Source: v1alpha1.CredentialsSourceNone},
			Policy:      v1alpha1.Policy{KVM: &v1alpha1.KVMPolicy{Pools: []string{"default-pool"}}}},
	}
}

func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(envtestTimeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
			return
		}
		if msg != last {
			t.Logf("waiting for %s: %s", what, msg)
		}
		last = msg
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last seen: %s", what, last)
}

// testDriver is the KVMProxy controller on a real API server, with a
// ClusterProviderConfig of a private libvirtd's test driver whose pool holds
// the base image base.qcow2.
type testDriver struct {
	e    *kube.Env
	l    *golibvirt.Libvirt
	pool golibvirt.StoragePool
	ns   string
	pc   *v1alpha1.ClusterProviderConfig
}

func startTestDriver(t *testing.T) testDriver {
	t.Helper()
	d := libvirtd.Start(t)
	l := d.DialURI(t, "test")
	pools, _, err := l.ConnectListAllStoragePools(1, 0)
	if err != nil || len(pools) == 0 {
		t.Fatalf("pools: %v", err)
	}
	if _, err := l.StorageVolCreateXML(pools[0], `<volume><name>base.qcow2</name><capacity unit='bytes'>1073741824</capacity><target><format type='qcow2'/></target></volume>`, 0); err != nil {
		t.Fatal(err)
	}
	e := kube.Start(t)
	startKVMProvider(t, e)
	ns := e.Namespace(t, "kvm")
	// A local socket needs no credentials, which only a cluster-scoped
	// config may use.
	pc := testDriverConfig(ns, d.Socket)
	if err := e.Client.Create(t.Context(), pc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), pc) })
	return testDriver{e: e, l: l, pool: pools[0], ns: ns, pc: pc}
}

// create creates a KVMProxy on the config, changed by mod, and returns its
// key.
func (d testDriver) create(t *testing.T, mod func(*v1alpha1.KVMProxy)) types.NamespacedName {
	t.Helper()
	mg := kvmProxy(d.ns, d.pc.Name)
	mod(mg)
	if err := d.e.Client.Create(t.Context(), mg); err != nil {
		t.Fatal(err)
	}
	return types.NamespacedName{Namespace: d.ns, Name: mg.Name}
}

// waitSynced waits until the resource at nn is Synced=False with a message
// that contains want, and returns it.
func (d testDriver) waitSynced(t *testing.T, what string, nn types.NamespacedName, want string) *v1alpha1.KVMProxy {
	t.Helper()
	got := &v1alpha1.KVMProxy{}
	waitFor(t, what, func() (bool, string) {
		err := d.e.Client.Get(t.Context(), nn, got)
		c := got.GetCondition(xpv2.TypeSynced)
		return err == nil && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, want), fmt.Sprint(c, err)
	})
	return got
}

// deleteAndWait deletes mg and waits until it is gone.
func (d testDriver) deleteAndWait(t *testing.T, mg *v1alpha1.KVMProxy) {
	t.Helper()
	if err := d.e.Client.Delete(t.Context(), mg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resource to be gone", func() (bool, string) {
		err := d.e.Client.Get(t.Context(), client.ObjectKeyFromObject(mg), &v1alpha1.KVMProxy{})
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprint(err)
	})
}

// checkNothingMade fails the test unless the pool holds only the base image
// and the driver only its own "test" domain.
func (d testDriver) checkNothingMade(t *testing.T, when string) {
	t.Helper()
	vols, _, err := d.l.StoragePoolListAllVolumes(d.pool, 1, 0)
	if err != nil || len(vols) != 1 || vols[0].Name != "base.qcow2" {
		t.Errorf("volumes %s: want only base.qcow2, got %v, %v", when, vols, err)
	}
	if doms, _, err := d.l.ConnectListAllDomains(1, 0); err != nil || len(doms) != 1 {
		t.Errorf("domains %s: want only the driver's own, got %v, %v", when, doms, err)
	}
}

func TestManagedReconcilerTestDriver(t *testing.T) {
	d := startTestDriver(t)
	ctx := t.Context()
	nn := d.create(t, func(*v1alpha1.KVMProxy) {})
	got := &v1alpha1.KVMProxy{}
	ready := func(notChecksum string) func() (bool, string) {
		return func() (bool, string) {
			err := d.e.Client.Get(ctx, nn, got)
			c := got.GetCondition(xpv2.TypeReady)
			ap := got.Status.AtProvider
			return err == nil && c.Status == corev1.ConditionTrue && ap.ConfigChecksum != notChecksum && ap.Endpoint != "",
				fmt.Sprint(c, ap, err)
		}
	}
	waitFor(t, "Ready=True", ready(""))
	name := got.GetAnnotations()["crossplane.io/external-name"]
	ap := got.Status.AtProvider
	if ap.InstanceID != "libvirt://default-pool/"+name || !strings.HasSuffix(ap.Endpoint, ":3128") || ap.MACAddress == "" || ap.State != commonv1alpha1.StateRunning {
		t.Errorf("status.atProvider: %+v", ap)
	}
	waitFor(t, "the connection Secret", func() (bool, string) {
		s := &corev1.Secret{}
		err := d.e.Client.Get(ctx, types.NamespacedName{Namespace: d.ns, Name: "proxy-conn"}, s)
		return err == nil && strings.HasPrefix(string(s.Data["url"]), "http://egressproxy:"), fmt.Sprint(err)
	})

	// A new allowlist replaces the VM: a new seed needs a fresh disk.
	first := ap.ConfigChecksum
	got.Spec.ForProvider.AllowedDestinations = []string{"api.example.org"}
	if err := d.e.Client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Ready=True with the new configuration", ready(first))

	// A VM destroyed behind the provider's back is replaced.
	dom, err := d.l.DomainLookupByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.l.DomainDestroyFlags(dom, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stopped VM to be replaced", func() (bool, string) {
		now, err := d.l.DomainLookupByName(name)
		if err != nil || now.UUID == dom.UUID {
			return false, fmt.Sprint("same domain or none: ", err)
		}
		st, err := d.l.DomainState(name)
		return err == nil && st == golibvirt.DomainRunning, fmt.Sprint(st, err)
	})

	d.deleteAndWait(t, got)
	if _, err := d.l.DomainLookupByName(name); err == nil {
		t.Error("the domain outlived its resource")
	}
	d.checkNothingMade(t, "after deleting the resource")
}

// TestManagedReconcilerRefused: a KVMProxy the provider must not act on is
// refused with Synced=False naming why, and nothing in the pool or the
// driver is touched.
func TestManagedReconcilerRefused(t *testing.T) {
	d := startTestDriver(t)
	cases := map[string]struct {
		reason string
		mod    func(*v1alpha1.KVMProxy)
		want   string
		// Provisioned says PermanentError.
		permanent bool
	}{
		"ForeignExternalName": {
			reason: "An external name that is not the one derived from the resource (\"base\", whose overlay would be the base image) is refused, naming the annotation.",
			mod: func(mg *v1alpha1.KVMProxy) {
				mg.SetAnnotations(map[string]string{"crossplane.io/external-name": "base"})
			},
			want:      "crossplane.io/external-name",
			permanent: true,
		},
		"Policy": {
			reason: "A KVMProxy written directly that the config's policy refuses (a bridge it does not list, its own cloud-init) is refused, naming the fields and the rules.",
			mod: func(mg *v1alpha1.KVMProxy) {
				mg.Spec.ForProvider.Network = &v1alpha1.KVMNetwork{Bridge: ptr.To("br-mgmt")}
				mg.Spec.ForProvider.UserDataSecretRef = &commonv1alpha1.LocalSecretKeySelector{Name: "ud", Key: "user-data"}
			},
			want: fmt.Sprintf(`spec.forProvider.network.bridge "br-mgmt" is not in ClusterProviderConfig %q spec.policy.kvm.bridges (unset: no bridge); `+
				`spec.forProvider.userDataSecretRef is set but ClusterProviderConfig %q spec.policy.kvm.allowUserData is not true`, d.ns, d.ns),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			nn := d.create(t, func(mg *v1alpha1.KVMProxy) {
				mg.Name = strings.ToLower(name)
				tc.mod(mg)
			})
			got := d.waitSynced(t, "Synced=False", nn, tc.want)
			if c := got.GetCondition(proxy.TypeProvisioned); tc.permanent && c.Reason != "PermanentError" {
				t.Errorf("%s\nProvisioned condition: want reason PermanentError, got %+v", tc.reason, c)
			}
			d.checkNothingMade(t, "while refused")
			// Nothing was ever observed, so no finalizer was added:
			// deleting the resource deletes nothing else.
			d.deleteAndWait(t, got)
			d.checkNothingMade(t, "after deleting the resource")
		})
	}
}
