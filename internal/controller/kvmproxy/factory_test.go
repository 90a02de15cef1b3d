/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvmproxy

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/libvirtd"
)

var (
	_ Backend               = &kvm.Backend{}
	_ backend.HealthChecker = &kvm.Backend{}
)

const ns = "team-a"

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.SchemeBuilder.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func providerConfig(uri string, secret string) *v1alpha1.ProviderConfig {
	pc := &v1alpha1.ProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kvm", UID: "pc-uid", Generation: 1},
		Spec:       v1alpha1.ProviderConfigSpec{URI: uri, Credentials: v1alpha1.Credentials{Source: v1alpha1.CredentialsSourceNone}},
	}
	if secret != "" {
		pc.Spec.Credentials = v1alpha1.Credentials{Source: v1alpha1.CredentialsSourceSecret, SecretRef: &commonv1alpha1.SecretReference{Name: secret}}
	}
	return pc
}

// clusterProviderConfig is a ClusterProviderConfig for a local socket, which
// only a cluster-scoped config may use.
func clusterProviderConfig(uri string) *v1alpha1.ClusterProviderConfig {
	return &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "kvm", UID: "cpc-uid", Generation: 1},
		Spec:       v1alpha1.ProviderConfigSpec{URI: uri, Credentials: v1alpha1.Credentials{Source: v1alpha1.CredentialsSourceNone}},
	}
}

func secret(name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

// closed reports whether b's connection was closed: a closed backend says
// so instead of dialling.
func closed(b Backend) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := b.(backend.HealthChecker).CheckHealth(ctx)
	return err != nil && strings.Contains(err.Error(), "connection was closed")
}

func TestFactoryCache(t *testing.T) {
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).
		WithObjects(secret("ssh", map[string][]byte{"ssh-privatekey": []byte("x")})).Build()
	f := NewFactory()
	ctx := context.Background()
	pc := clusterProviderConfig("test+unix:///default?socket=/nonexistent/sock")
	cfg := proxy.Config{Object: pc}

	first, err := f(ctx, kube, cfg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := f(ctx, kube, cfg)
	if err != nil || again != first {
		t.Errorf("the same config version must reuse its backend: %v", err)
	}
	pc.Generation = 2
	next, err := f(ctx, kube, cfg)
	if err != nil || next == first {
		t.Fatalf("a new generation must rebuild the backend: %v", err)
	}
	if !closed(first) || closed(next) {
		t.Error("the replaced backend's connection, and only it, must be closed")
	}
}

// sshSecretData is a key and a known_hosts line for the host "host".
func sshSecretData(t *testing.T) map[string][]byte {
	t.Helper()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		t.Fatal(err)
	}
	hostPub, _, _ := ed25519.GenerateKey(rand.Reader)
	pub, err := ssh.NewPublicKey(hostPub)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"ssh-privatekey": pem.EncodeToMemory(block),
		"known_hosts":    []byte(knownhosts.Line([]string{"host"}, pub) + "\n"),
	}
}

func TestFactorySecretRotation(t *testing.T) {
	s := secret("ssh", sshSecretData(t))
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(s, secret("tls", map[string][]byte{"tls.crt": []byte("x")})).Build()
	f := NewFactory()
	ctx := context.Background()
	cfg := proxy.Config{Object: providerConfig("qemu+ssh://root@host/system", "ssh"), SecretNamespace: ns}
	first, err := f(ctx, kube, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Data = sshSecretData(t)
	if err := kube.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	rotated, err := f(ctx, kube, cfg)
	if err != nil || rotated == first || !closed(first) {
		t.Errorf("a rotated Secret must rebuild the backend and close the old one: %v", err)
	}
	tls := proxy.Config{Object: providerConfig("qemu+tls://host/system", "tls"), SecretNamespace: ns}
	if _, err := f(ctx, kube, tls); backend.ClassOf(err) != backend.ClassPermanent {
		t.Errorf("an incomplete TLS Secret: want Permanent, got %v", err)
	}
	missing := proxy.Config{Object: providerConfig("qemu+ssh://root@host/system", "nope"), SecretNamespace: ns}
	if _, err := f(ctx, kube, missing); backend.ClassOf(err) != backend.ClassPermanent {
		t.Errorf("a missing credentials Secret: want Permanent, got %v", err)
	}
	noRef := providerConfig("qemu+ssh://root@host/system", "")
	noRef.Spec.Credentials.Source = v1alpha1.CredentialsSourceSecret
	if _, err := f(ctx, kube, proxy.Config{Object: noRef, SecretNamespace: ns}); backend.ClassOf(err) != backend.ClassPermanent {
		t.Errorf("Source Secret without secretRef: want Permanent, got %v", err)
	}
}

func TestUserDataFromSecrets(t *testing.T) {
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).
		WithObjects(secret("ud", map[string][]byte{"user-data": []byte("#cloud-config\n"), "empty": {}})).Build()
	read := UserDataFromSecrets(kube)
	ctx := context.Background()
	if ud, err := read(ctx, ns, commonv1alpha1.LocalSecretKeySelector{Name: "ud", Key: "user-data"}); err != nil || string(ud) != "#cloud-config\n" {
		t.Errorf("user-data: %q, %v", ud, err)
	}
	for name, ref := range map[string]commonv1alpha1.LocalSecretKeySelector{
		"MissingSecret": {Name: "nope", Key: "user-data"},
		"MissingKey":    {Name: "ud", Key: "nope"},
		"EmptyKey":      {Name: "ud", Key: "empty"},
	} {
		if _, err := read(ctx, ns, ref); backend.ClassOf(err) != backend.ClassPermanent {
			t.Errorf("%s: want Permanent, got %v", name, err)
		}
	}
	if _, err := read(ctx, "other-namespace", commonv1alpha1.LocalSecretKeySelector{Name: "ud", Key: "user-data"}); err == nil {
		t.Error("a Secret of another namespace was read")
	}
}

// TestFactoryNamespacedLocal: a namespaced ProviderConfig never reaches the
// provider's own libvirt, whatever form the local socket takes; the same
// spec in a ClusterProviderConfig builds a backend.
func TestFactoryNamespacedLocal(t *testing.T) {
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(secret("ssh", sshSecretData(t))).Build()
	f := NewFactory()
	ctx := context.Background()
	cases := map[string]struct {
		uri, socketPath, secret string
	}{
		"System":           {uri: "qemu:///system"},
		"UnixSocketParam":  {uri: "qemu+unix:///system?socket=/any/path"},
		"TestDriver":       {uri: "test:///default"},
		"SocketPath":       {uri: "qemu:///system", socketPath: "/var/run/libvirt/libvirt-sock"},
		"SocketPathOnSSH":  {uri: "qemu+ssh://root@host/system", socketPath: "/var/run/libvirt/libvirt-sock", secret: "ssh"},
		"LocalWithASecret": {uri: "qemu+unix:///system", secret: "ssh"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pc := providerConfig(tc.uri, tc.secret)
			if tc.socketPath != "" {
				pc.Spec.SocketPath = ptr.To(tc.socketPath)
			}
			if _, err := f(ctx, kube, proxy.Config{Object: pc, SecretNamespace: ns}); backend.ClassOf(err) != backend.ClassPermanent {
				t.Errorf("namespaced %s: want Permanent, got %v", tc.uri, err)
			}
			cpc := clusterProviderConfig(tc.uri)
			cpc.Spec.SocketPath, cpc.Spec.Credentials = pc.Spec.SocketPath, pc.Spec.Credentials
			if tc.secret != "" {
				cpc.Spec.Credentials.SecretRef.Namespace = ns
			}
			b, err := f(ctx, kube, proxy.Config{Object: cpc})
			if err != nil {
				t.Fatalf("cluster-scoped %s: %v", tc.uri, err)
			}
			_ = b.(interface{ Close() error }).Close()
		})
	}
	remote := proxy.Config{Object: providerConfig("qemu+ssh://root@host/system", "ssh"), SecretNamespace: ns}
	if _, err := f(ctx, kube, remote); err != nil {
		t.Errorf("namespaced qemu+ssh: %v", err)
	}
}

// TestFactoryTestDriver builds a backend from a ClusterProviderConfig
// pointing at a private libvirtd's test driver, with socketPath, and checks
// it answers.
func TestFactoryTestDriver(t *testing.T) {
	d := libvirtd.Start(t)
	pc := clusterProviderConfig("test:///default")
	pc.Spec.SocketPath = ptr.To(d.Socket)
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).Build()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := NewFactory()(ctx, kube, proxy.Config{Object: pc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.(interface{ Close() error }).Close() })
	if err := b.(backend.HealthChecker).CheckHealth(ctx); err != nil {
		t.Errorf("CheckHealth: %v", err)
	}
	if _, err := b.List(ctx); err != nil {
		t.Errorf("List: %v", err)
	}
}

// TestFactoryPolicy: the backend enforces the policy of the config it was
// built from, naming the config, and a new generation of the config (an
// edited policy) builds a backend with the new one. Create refuses before
// its first call to libvirt, so no daemon is needed.
func TestFactoryPolicy(t *testing.T) {
	pc := clusterProviderConfig("test:///default")
	pc.Name = "lab"
	pc.Spec.Policy.KVM = &v1alpha1.KVMPolicy{Bridges: []string{"br-proxies"}}
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).Build()
	f := NewFactory()
	owner := backend.Owner{UID: "0b4f2d7e-1111-4c2a-9d7e-5a0c6f3e9b21", Namespace: ns, Name: "proxy"}
	d := kvm.Desired{
		Name:      backend.Name(owner, 63),
		Ownership: backend.Ownership{Owner: owner, ProviderInstance: "test"},
		Params: v1alpha1.KVMProxyParameters{BaseImageVolume: "base.qcow2",
			Network: &v1alpha1.KVMNetwork{Bridge: ptr.To("br-mgmt")}},
	}
	create := func() string {
		b, err := f(context.Background(), kube, proxy.Config{Object: pc})
		if err != nil {
			t.Fatal(err)
		}
		err = b.Create(context.Background(), d)
		if backend.ClassOf(err) != backend.ClassPermanent {
			t.Fatalf("Create: want a Permanent error, got %v", err)
		}
		return err.Error()
	}
	if got, want := create(), `spec.forProvider.network.bridge "br-mgmt" is not in ClusterProviderConfig "lab" spec.policy.kvm.bridges`; got != want {
		t.Errorf("Create: -want +got:\n-%s\n+%s", want, got)
	}
	pc.Spec.Policy.KVM = &v1alpha1.KVMPolicy{Bridges: []string{"br-proxies"}, MaxVCPUs: ptr.To[int32](0)}
	pc.Generation++
	if got, want := create(), `spec.forProvider.network.bridge "br-mgmt" is not in ClusterProviderConfig "lab" spec.policy.kvm.bridges; spec.forProvider.vcpus 1 is more than ClusterProviderConfig "lab" spec.policy.kvm.maxVCPUs (0)`; got != want {
		t.Errorf("Create after the policy changed: -want +got:\n-%s\n+%s", want, got)
	}
}

// TestFactoryNamespacedSource shows a namespaced ProviderConfig refused any
// credentials source but Secret in Go, as for the other backends.
func TestFactoryNamespacedSource(t *testing.T) {
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).Build()
	_, err := NewFactory()(t.Context(), kube, proxy.Config{Object: providerConfig("qemu+ssh://root@host/system", ""), SecretNamespace: ns})
	if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), `spec.credentials.source "None": a namespaced ProviderConfig must use Secret`) {
		t.Errorf("a namespaced config with source None: got %v, want a Permanent refusal", err)
	}
}
