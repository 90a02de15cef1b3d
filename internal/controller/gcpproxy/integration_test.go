/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcpproxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake/proxyguest"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

func startProvider(t *testing.T, e *kube.Env, f BackendFactory) {
	t.Helper()
	ctrl.SetLogger(logr.Discard())
	e.RunManager(t, func(mgr ctrl.Manager, o controller.Options) error {
		o.Logger = logging.NewNopLogger()
		return Controller.Setup(mgr, proxy.Options{Options: o, ProviderInstance: "test", CredentialsKey: []byte("a test key of thirty-two bytes.."), Timeout: 30 * time.Second}, f)
	})
}

// TestManagedGCPProxy runs the GCPProxy controller on a real API server
// against the GCE fake, through the factory and a service account key.
func TestManagedGCPProxy(t *testing.T) {
	e := kube.Start(t)
	fake := gcpfake.NewTestServer(t, gcpfake.WithRequireAuth())
	// No VM runs here: stand in for every guest's serving report.
	go proxyguest.Run(t.Context(), fake, proxyguest.DefaultEvery)
	key, err := fake.NewServiceAccountKey("")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ns := e.Namespace(t, "gcp")
	endpoint := fake.URL()
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: testSecret}, Data: map[string][]byte{testKey: key}},
		&v1alpha1.ProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gcp"},
			Spec:       v1alpha1.ProviderConfigSpec{ProjectID: testProject, Credentials: secretCreds(), Endpoint: &endpoint},
		},
	} {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	startProvider(t, e, NewFactory(WithCallTimeout(10*time.Second)))

	mg := &v1alpha1.GCPProxy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: v1alpha1.GCPProxySpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{
				ProviderConfigReference:          &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "gcp"},
				WriteConnectionSecretToReference: &xpv2.LocalSecretReference{Name: "web-proxy"},
			},
			ForProvider: v1alpha1.GCPProxyParameters{
				Zone:            "us-central1-a",
				ProxyParameters: commonv1alpha1.ProxyParameters{AllowedClientCIDRs: []string{"10.0.0.0/8"}, AllowedDestinations: []string{"api.example.com"}},
			},
		},
	}
	if err := e.Client.Create(ctx, mg); err != nil {
		t.Fatal(err)
	}
	nn := types.NamespacedName{Namespace: ns, Name: "web"}
	got := &v1alpha1.GCPProxy{}
	t.Logf("%s: waiting for Ready", time.Now().Format(time.StampMilli))
	kube.Eventually(t, "Ready=True", func() (bool, string) {
		err := e.Client.Get(ctx, nn, got)
		c := got.GetCondition(xpv2.TypeReady)
		return err == nil && c.Status == corev1.ConditionTrue, fmt.Sprint(got.Status.Conditions, err)
	})
	addrs := fake.Addresses()
	if len(addrs) != 1 || len(got.Status.AtProvider.EgressIPs) != 1 || got.Status.AtProvider.EgressIPs[0] != addrs[0].GetAddress() {
		t.Fatalf("status.atProvider.egressIPs = %v, want the static address %v", got.Status.AtProvider.EgressIPs, addrs)
	}
	if at := got.Status.AtProvider; !strings.HasPrefix(at.InstanceID, "gce://test-project/us-central1-a/egp-") || at.FirewallName == "" || at.InternalIP == "" {
		t.Errorf("status.atProvider = %+v", at)
	}
	kube.Eventually(t, "the connection Secret", func() (bool, string) {
		s := &corev1.Secret{}
		err := e.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-proxy"}, s)
		want := addrs[0].GetAddress() + ":3128"
		return err == nil && string(s.Data[proxy.ConnectionEndpoint]) == want && len(s.Data[proxy.ConnectionPassword]) > 0, fmt.Sprint(err)
	})

	t.Logf("%s: deleting", time.Now().Format(time.StampMilli))
	if err := e.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	kube.Eventually(t, "the resource to be gone", func() (bool, string) {
		cur := &v1alpha1.GCPProxy{}
		err := e.Client.Get(ctx, nn, cur)
		t.Logf("%s: %v %v", time.Now().Format(time.StampMilli), cur.Status.Conditions, cur.Finalizers)
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprint(err)
	})
	if n := len(fake.Instances()) + len(fake.Firewalls()) + len(fake.Addresses()); n != 0 {
		t.Errorf("after deletion %d cloud resources are left: %v %v %v", n, fake.Instances(), fake.Firewalls(), fake.Addresses())
	}
}
