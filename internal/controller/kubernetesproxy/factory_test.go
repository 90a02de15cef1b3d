/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetesproxy

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kubernetes"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
	kubeenv "github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

var (
	_ Backend               = &kubernetes.Backend{}
	_ backend.HealthChecker = &kubernetes.Backend{}
)

const (
	testConfigNS = "team-a"
	testSecret   = "target-kubeconfig"
	testKey      = "kubeconfig"
)

// kubeconfig returns a kubeconfig for server; mod changes its user.
func kubeconfig(t *testing.T, server string, mod func(*clientcmdapi.AuthInfo)) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "not-a-real-token"}
	if mod != nil {
		mod(kc.AuthInfos["u"])
	}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func secretConfig(ref *commonv1alpha1.SecretKeySelector) proxy.Config {
	return proxy.Config{
		Object: &v1alpha1.ProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: testConfigNS, Name: "pc", UID: "pc-uid", Generation: 1},
			Spec:       v1alpha1.ProviderConfigSpec{Credentials: v1alpha1.Credentials{Source: v1alpha1.CredentialsSourceSecret, SecretRef: ref}},
		},
		SecretNamespace: testConfigNS,
	}
}

func injectedConfig() proxy.Config {
	return proxy.Config{Object: &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "cpc", UID: "cpc-uid", Generation: 1},
		Spec:       v1alpha1.ProviderConfigSpec{Credentials: v1alpha1.Credentials{Source: v1alpha1.CredentialsSourceInjectedIdentity}},
	}}
}

func ref() *commonv1alpha1.SecretKeySelector {
	return &commonv1alpha1.SecretKeySelector{SecretReference: commonv1alpha1.SecretReference{Name: testSecret}, Key: testKey}
}

func control(t *testing.T, data []byte) client.Client {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testConfigNS, Name: testSecret},
		Data:       map[string][]byte{testKey: data},
	}
	return fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(s).Build()
}

func TestFactoryErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		data   []byte
		cfg    proxy.Config
		opts   []FactoryOption
		want   backend.Class
		msg    string
	}{
		"Garbled": {
			reason: "A kubeconfig that does not parse is Permanent and names where it came from.",
			data:   []byte("{this is: [not a kubeconfig"),
			cfg:    secretConfig(ref()),
			want:   backend.ClassPermanent,
			msg:    "cannot parse the kubeconfig in Secret team-a/target-kubeconfig key kubeconfig",
		},
		"MissingKey": {
			reason: "A Secret without the key is Permanent.",
			data:   []byte("x"),
			cfg: secretConfig(&commonv1alpha1.SecretKeySelector{
				SecretReference: commonv1alpha1.SecretReference{Name: testSecret}, Key: "other",
			}),
			want: backend.ClassPermanent,
			msg:  `has no key "other"`,
		},
		"MissingSecret": {
			reason: "A missing Secret is Permanent.",
			data:   []byte("x"),
			cfg: secretConfig(&commonv1alpha1.SecretKeySelector{
				SecretReference: commonv1alpha1.SecretReference{Name: "absent"}, Key: testKey,
			}),
			want: backend.ClassPermanent,
			msg:  "cannot get Secret team-a/absent",
		},
		"NoSecretRef": {
			reason: "Source Secret without a secretRef is Permanent.",
			cfg:    secretConfig(nil),
			want:   backend.ClassPermanent,
			msg:    errNoSecretRef,
		},
		"ExecPlugin": {
			reason: "The provider never runs a credential plugin from a Secret.",
			data: kubeconfig(t, "https://127.0.0.1:6443", func(u *clientcmdapi.AuthInfo) {
				u.Token = ""
				u.Exec = &clientcmdapi.ExecConfig{Command: "/bin/sh", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
			}),
			cfg:  secretConfig(ref()),
			want: backend.ClassPermanent,
			msg:  "uses an exec credential plugin",
		},
		"TokenFile": {
			reason: "The provider never reads a file a Secret names, such as its own token.",
			data: kubeconfig(t, "https://127.0.0.1:6443", func(u *clientcmdapi.AuthInfo) {
				u.Token = ""
				u.TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
			}),
			cfg:  secretConfig(ref()),
			want: backend.ClassPermanent,
			msg:  "uses a token file",
		},
		"NotInCluster": {
			reason: "InjectedIdentity outside a cluster is Permanent.",
			cfg:    injectedConfig(),
			want:   backend.ClassPermanent,
			msg:    errInCluster,
		},
		"UnknownSource": {
			reason: "An unknown source is Permanent.",
			cfg: proxy.Config{Object: &v1alpha1.ClusterProviderConfig{
				Spec: v1alpha1.ProviderConfigSpec{Credentials: v1alpha1.Credentials{Source: "Magic"}},
			}},
			want: backend.ClassPermanent,
			msg:  `unknown credentials.source "Magic"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			b, err := NewFactory(tc.opts...)(t.Context(), control(t, tc.data), tc.cfg)
			if diff := cmp.Diff(tc.want, backend.ClassOf(err)); diff != "" {
				t.Errorf("%s\nfactory class: -want, +got:\n%s\nerror: %v", tc.reason, diff, err)
			}
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s\nfactory = %v, want a message containing %q", tc.reason, err, tc.msg)
			}
			t.Logf("message: %v", err)
			if b != nil {
				t.Errorf("%s\nfactory returned a backend with an error", tc.reason)
			}
		})
	}
}

func TestFactoryCache(t *testing.T) {
	kube := control(t, kubeconfig(t, "https://127.0.0.1:6443", nil))
	f := NewFactory()
	cfg := secretConfig(ref())
	get := func() Backend {
		t.Helper()
		b, err := f(t.Context(), kube, cfg)
		if err != nil || b == nil {
			t.Fatalf("factory: %v, %v", b, err)
		}
		return b
	}
	first := get()
	if get() != first {
		t.Errorf("the same config and Secret must reuse the backend")
	}
	s := &corev1.Secret{}
	if err := kube.Get(t.Context(), client.ObjectKey{Namespace: testConfigNS, Name: testSecret}, s); err != nil {
		t.Fatal(err)
	}
	s.Data[testKey] = kubeconfig(t, "https://127.0.0.2:6443", nil)
	if err := kube.Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	second := get()
	if second == first {
		t.Errorf("a changed Secret must rebuild the backend")
	}
	cfg.Object.SetGeneration(2)
	if get() == second {
		t.Errorf("a changed provider config must rebuild the backend")
	}
}

// TestFactoryNamespacedInjected shows a namespaced ProviderConfig refused
// the provider's own identity in Go, not by admission alone.
func TestFactoryNamespacedInjected(t *testing.T) {
	f := NewFactory(WithInjectedConfig(&rest.Config{Host: "https://127.0.0.1:6443"}), WithCallTimeout(5e9))
	cfg := secretConfig(nil)
	cfg.Object.(*v1alpha1.ProviderConfig).Spec.Credentials = v1alpha1.Credentials{Source: v1alpha1.CredentialsSourceInjectedIdentity}
	b, err := f(t.Context(), control(t, nil), cfg)
	if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), "a namespaced ProviderConfig must use Secret") || b != nil {
		t.Errorf("a namespaced config with InjectedIdentity: got %v, %v; want a Permanent refusal", b, err)
	}
}

func TestFactoryInjected(t *testing.T) {
	f := NewFactory(WithInjectedConfig(&rest.Config{Host: "https://127.0.0.1:6443"}), WithCallTimeout(5e9))
	b, err := f(t.Context(), control(t, nil), injectedConfig())
	if err != nil || b == nil {
		t.Fatalf("factory with an injected config: %v, %v", b, err)
	}
}

func TestFactoryIntegration(t *testing.T) {
	env := kubeenv.Start(t)
	ctx := t.Context()
	ns := env.Namespace(t, "team")
	kc, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string, data []byte) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{testKey: data}}
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	put("broken", []byte("apiVersion: v1\nclusters: {{{"))
	put("good", kc)
	config := func(secret string) proxy.Config {
		cfg := secretConfig(&commonv1alpha1.SecretKeySelector{SecretReference: commonv1alpha1.SecretReference{Name: secret}, Key: testKey})
		cfg.Object.SetNamespace(ns)
		cfg.Object.SetUID(types.UID(secret))
		cfg.SecretNamespace = ns
		return cfg
	}
	f := NewFactory()

	_, err = f(ctx, env.Client, config("broken"))
	want := "cannot parse the kubeconfig in Secret " + ns + "/broken key " + testKey
	if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), want) {
		t.Errorf("factory with a broken kubeconfig = %v (class %s), want a Permanent error saying %q", err, backend.ClassOf(err), want)
	}

	b, err := f(ctx, env.Client, config("good"))
	if err != nil {
		t.Fatalf("factory with a working kubeconfig: %v", err)
	}
	d := backend.Desired[v1alpha1.KubernetesProxyParameters]{
		Name:        "egp-factory-test",
		Ownership:   backend.Ownership{Owner: backend.Owner{UID: "uid-1", Namespace: ns, Name: "web"}, ProviderInstance: "default"},
		Proxy:       commonv1alpha1.ProxyParameters{Port: 3128, AllowedClientCIDRs: []string{"10.0.0.0/8"}},
		Credentials: backend.Credentials{Username: "u", Password: "p"},
		Params:      v1alpha1.KubernetesProxyParameters{Namespace: ns},
	}
	if err := b.Create(ctx, d); err != nil {
		t.Fatalf("Create through the factory's backend: %v", err)
	}
	o, err := b.Observe(ctx, d)
	if err != nil || !o.UpToDate || !strings.HasPrefix(o.ID, "kubernetes://127.0.0.1:") {
		t.Errorf("Observe through the factory's backend = %+v, %v; want an up-to-date instance with a kubernetes:// ID", o, err)
	}
	if h, ok := b.(backend.HealthChecker); !ok || h.CheckHealth(ctx) != nil {
		t.Errorf("the backend must implement HealthChecker and be healthy with admin credentials")
	}
}

// TestFactoryPolicy shows that the backend enforces the allowlists of the
// config it was built from, names the field and the config, and picks up a
// changed allowlist. A refused proxy makes no call; an allowed one here
// reaches a closed loopback port and fails as Transient.
func TestFactoryPolicy(t *testing.T) {
	desired := func(ns, image string) backend.Desired[v1alpha1.KubernetesProxyParameters] {
		return backend.Desired[v1alpha1.KubernetesProxyParameters]{
			Name:        "egp-policy-test",
			Ownership:   backend.Ownership{Owner: backend.Owner{UID: "uid-1", Namespace: testConfigNS, Name: "web"}, ProviderInstance: "default"},
			Proxy:       commonv1alpha1.ProxyParameters{Port: 3128, AllowedClientCIDRs: []string{"10.0.0.0/8"}},
			Credentials: backend.Credentials{Username: "u", Password: "p"},
			Params:      v1alpha1.KubernetesProxyParameters{Namespace: ns, Image: &image},
		}
	}
	cluster := func(namespaces, images []string) proxy.Config {
		cfg := injectedConfig()
		pc := cfg.Object.(*v1alpha1.ClusterProviderConfig) //nolint:forcetypeassert // injectedConfig makes one.
		pc.Spec.AllowedNamespaces, pc.Spec.AllowedImages = namespaces, images
		return cfg
	}
	cases := map[string]struct {
		reason string
		cfg    proxy.Config
		d      backend.Desired[v1alpha1.KubernetesProxyParameters]
		want   backend.Class
		msg    string
	}{
		"ProviderConfigOwnNamespace": {
			reason: "A ProviderConfig with no allowedNamespaces lets a proxy run in the namespace named like its resource's.",
			cfg:    secretConfig(ref()),
			d:      desired(testConfigNS, kubernetes.DefaultImage),
			want:   backend.ClassTransient,
		},
		"ProviderConfigOtherNamespace": {
			reason: "A ProviderConfig with no allowedNamespaces refuses another namespace, naming the field and the config.",
			cfg:    secretConfig(ref()),
			d:      desired("team-b", kubernetes.DefaultImage),
			want:   backend.ClassPermanent,
			msg:    `spec.forProvider.namespace "team-b" is not allowed by ProviderConfig team-a/pc`,
		},
		"ClusterListed": {
			reason: "A listed namespace and image are allowed.",
			cfg:    cluster([]string{"egress"}, []string{"registry.example.com/"}),
			d:      desired("egress", "registry.example.com/squid:6"),
			want:   backend.ClassTransient,
		},
		"ClusterImage": {
			reason: "An image outside allowedImages is refused, naming the field and the config.",
			cfg:    cluster([]string{"egress"}, []string{"registry.example.com/"}),
			d:      desired("egress", "docker.io/evil/squid:1"),
			want:   backend.ClassPermanent,
			msg:    `spec.forProvider.image "docker.io/evil/squid:1" is not allowed by ClusterProviderConfig cpc`,
		},
		"ClusterKubeSystem": {
			reason: `kube-system is refused even when the config allows "*".`,
			cfg:    cluster([]string{"*"}, nil),
			d:      desired("kube-system", kubernetes.DefaultImage),
			want:   backend.ClassPermanent,
			msg:    `spec.forProvider.namespace "kube-system" is refused`,
		},
	}
	closed := &rest.Config{Host: "https://127.0.0.1:1"}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kc := kubeconfig(t, closed.Host, nil)
			b, err := NewFactory(WithInjectedConfig(closed), WithCallTimeout(5e9))(t.Context(), control(t, kc), tc.cfg)
			if err != nil {
				t.Fatalf("factory: %v", err)
			}
			err = b.Create(t.Context(), tc.d)
			if diff := cmp.Diff(tc.want, backend.ClassOf(err)); diff != "" {
				t.Errorf("%s\nCreate class: -want, +got:\n%s\nerror: %v", tc.reason, diff, err)
			}
			if tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg)) {
				t.Errorf("%s\nCreate = %v, want a message containing %q", tc.reason, err, tc.msg)
			}
		})
	}

	t.Run("ChangedAllowlist", func(t *testing.T) {
		f := NewFactory(WithInjectedConfig(closed), WithCallTimeout(5e9))
		cfg := cluster([]string{"egress"}, nil)
		d := desired("proxies", kubernetes.DefaultImage)
		for i, want := range []backend.Class{backend.ClassPermanent, backend.ClassTransient} {
			b, err := f(t.Context(), control(t, nil), cfg)
			if err != nil {
				t.Fatalf("factory: %v", err)
			}
			if err := b.Create(t.Context(), d); backend.ClassOf(err) != want {
				t.Errorf("Create #%d = %v, want class %s", i, err, want)
			}
			pc := cfg.Object.(*v1alpha1.ClusterProviderConfig) //nolint:forcetypeassert // cluster makes one.
			pc.Spec.AllowedNamespaces = append(pc.Spec.AllowedNamespaces, "proxies")
			pc.SetGeneration(pc.GetGeneration() + 1)
		}
	})
}

// TestPolicyOfConfig checks that a config's allowlists and spec.policy.kubernetes
// reach the backend's Policy, named after the config.
func TestPolicyOfConfig(t *testing.T) {
	k := &v1alpha1.KubernetesPolicy{ServiceTypes: []corev1.ServiceType{corev1.ServiceTypeLoadBalancer}, NodeSelectors: []string{"egress"}}
	spec := v1alpha1.ProviderConfigSpec{AllowedNamespaces: []string{"egress"}, AllowedImages: []string{"registry.example.com/"}, Policy: v1alpha1.Policy{Kubernetes: k}}
	cfg := proxy.Config{Object: &v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "target"}, Spec: spec}}
	want := kubernetes.Policy{Config: "ProviderConfig team-a/target", Namespaces: spec.AllowedNamespaces, Images: spec.AllowedImages, KubernetesPolicy: *k}
	if diff := cmp.Diff(want, policy(cfg, spec)); diff != "" {
		t.Errorf("policy: -want +got:\n%s", diff)
	}
	if diff := cmp.Diff(kubernetes.Policy{Config: "ClusterProviderConfig default"}, policy(proxy.Config{Object: &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "default"}}}, v1alpha1.ProviderConfigSpec{})); diff != "" {
		t.Errorf("policy of a config without one: -want +got:\n%s", diff)
	}
}
