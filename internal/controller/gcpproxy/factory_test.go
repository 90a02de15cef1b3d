/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcpproxy

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/gcp"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
)

var (
	_ Backend               = &gcp.Backend{}
	_ backend.HealthChecker = &gcp.Backend{}
)

const (
	testConfigNS = "team-a"
	testSecret   = "gcp-key"
	testKey      = "key.json"
	testProject  = "test-project"
)

func keyRef() *commonv1alpha1.SecretKeySelector {
	return &commonv1alpha1.SecretKeySelector{SecretReference: commonv1alpha1.SecretReference{Name: testSecret}, Key: testKey}
}

func config(endpoint string, creds v1alpha1.Credentials) proxy.Config {
	spec := v1alpha1.ProviderConfigSpec{ProjectID: testProject, Credentials: creds}
	if endpoint != "" {
		spec.Endpoint = &endpoint
	}
	return proxy.Config{
		Object: &v1alpha1.ProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: testConfigNS, Name: "gcp", UID: "pc-uid", Generation: 1},
			Spec:       spec,
		},
		SecretNamespace: testConfigNS,
	}
}

// clusterConfig is config as a ClusterProviderConfig, which alone may use
// the provider's own identity.
func clusterConfig(endpoint string, creds v1alpha1.Credentials) proxy.Config {
	pc := config(endpoint, creds).Object.(*v1alpha1.ProviderConfig)
	return proxy.Config{Object: &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "gcp", UID: "cpc-uid", Generation: 1}, Spec: pc.Spec}}
}

func secretCreds() v1alpha1.Credentials {
	return v1alpha1.Credentials{Source: v1alpha1.CredentialsSourceSecret, SecretRef: keyRef()}
}

func control(t *testing.T, key []byte) client.Client {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testConfigNS, Name: testSecret},
		Data:       map[string][]byte{testKey: key},
	}
	return fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(s).Build()
}

func desired() gcp.Desired {
	return gcp.Desired{
		Name:        "egp-team-a-web-1a2b3c4d",
		Ownership:   backend.Ownership{Owner: backend.Owner{UID: "6f0c2f7e-1d55-4c1b-9b7a-2b1f3c4d5e6f", Namespace: "team-a", Name: "web"}, ProviderInstance: "default"},
		Proxy:       commonv1alpha1.ProxyParameters{Port: 3128, AllowedClientCIDRs: []string{"10.0.0.0/8"}, AllowedDestinations: []string{"api.example.com"}},
		Credentials: backend.Credentials{Username: "u", Password: "p"},
		Params:      v1alpha1.GCPProxyParameters{Zone: "us-central1-a"},
	}
}

func TestFactoryErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		key    string
		cfg    proxy.Config
		msg    string
	}{
		"ExternalAccount": {
			reason: "A key of another type is refused before the auth library acts on it.",
			key:    `{"type": "external_account", "credential_source": {"file": "/var/run/secrets/kubernetes.io/serviceaccount/token"}}`,
			cfg:    config("", secretCreds()),
			msg:    `Secret team-a/gcp-key key key.json holds credentials of type "external_account": only service account keys (type "service_account") are accepted`,
		},
		"NotJSON": {
			reason: "A Secret that is not JSON is Permanent, and its content is not quoted.",
			key:    "-----BEGIN PRIVATE KEY-----",
			cfg:    config("", secretCreds()),
			msg:    "Secret team-a/gcp-key key key.json does not hold a JSON service account key",
		},
		"BrokenKey": {
			reason: "A service account key without a usable private key is Permanent.",
			key:    `{"type": "service_account", "client_email": "a@b", "private_key": "nope"}`,
			cfg:    config("", secretCreds()),
			msg:    "cannot load the service account key in Secret team-a/gcp-key key key.json",
		},
		"ForeignTokenURI": {
			reason: "The provider posts to a key's token_uri from its pod: only Google's is accepted.",
			key:    `{"type": "service_account", "client_email": "a@b", "private_key": "nope", "token_uri": "http://169.254.169.254/computeMetadata/v1/"}`,
			cfg:    config("", secretCreds()),
			msg:    `names token_uri "http://169.254.169.254/computeMetadata/v1/": only https://oauth2.googleapis.com/token`,
		},
		"TokenURIOtherPort": {
			reason: "A token_uri on spec.endpoint's host name passes on any port (a relay in front of a fake); the key is then read.",
			key:    `{"type": "service_account", "client_email": "a@b", "private_key": "nope", "token_uri": "https://compute.example.com:8443/token"}`,
			cfg:    config("https://compute.example.com", secretCreds()),
			msg:    "cannot load the service account key in Secret team-a/gcp-key key key.json",
		},
		"TokenURIOtherHost": {
			reason: "With spec.endpoint set, a token_uri on another host is still refused.",
			key:    `{"type": "service_account", "client_email": "a@b", "private_key": "nope", "token_uri": "https://token.example.com/token"}`,
			cfg:    config("https://compute.example.com", secretCreds()),
			msg:    `names token_uri "https://token.example.com/token"`,
		},
		"ForeignUniverse": {
			reason: "A universe_domain makes the client call compute.<domain>: only Google's is accepted.",
			key:    `{"type": "service_account", "client_email": "a@b", "private_key": "nope", "universe_domain": "example.com"}`,
			cfg:    config("", secretCreds()),
			msg:    `names universe_domain "example.com"`,
		},
		"NamespacedInjected": {
			reason: "A namespaced ProviderConfig may not use the provider's own identity (checked in Go, not by admission alone).",
			cfg:    config("", v1alpha1.Credentials{Source: v1alpha1.CredentialsSourceInjectedIdentity}),
			msg:    `spec.credentials.source "InjectedIdentity": a namespaced ProviderConfig must use Secret`,
		},
		"NamespacedImpersonate": {
			reason: "Impersonation runs on the provider's own identity too.",
			cfg: config("", v1alpha1.Credentials{Source: v1alpha1.CredentialsSourceImpersonateServiceAccount,
				ImpersonateServiceAccount: &v1alpha1.ImpersonateServiceAccount{Name: "platform@p.iam.gserviceaccount.com"}}),
			msg: `spec.credentials.source "ImpersonateServiceAccount": a namespaced ProviderConfig must use Secret`,
		},
		"NoSecretRef": {
			reason: "Source Secret without a secretRef is Permanent.",
			cfg:    config("", v1alpha1.Credentials{Source: v1alpha1.CredentialsSourceSecret}),
			msg:    errNoSecretRef,
		},
		"MissingKey": {
			reason: "A Secret without the key is Permanent.",
			key:    "{}",
			cfg: config("", v1alpha1.Credentials{Source: v1alpha1.CredentialsSourceSecret, SecretRef: &commonv1alpha1.SecretKeySelector{
				SecretReference: commonv1alpha1.SecretReference{Name: testSecret}, Key: "other",
			}}),
			msg: `has no key "other"`,
		},
		"PlainHTTP": {
			reason: "Tokens never travel in clear text beyond loopback.",
			key:    "{}",
			cfg:    config("http://compute.example.internal", secretCreds()),
			msg:    `spec.endpoint "http://compute.example.internal" must be an https URL`,
		},
		"NoImpersonationTarget": {
			reason: "ImpersonateServiceAccount needs a name.",
			cfg:    clusterConfig("", v1alpha1.Credentials{Source: v1alpha1.CredentialsSourceImpersonateServiceAccount}),
			msg:    errNoImpersonate,
		},
		"UnknownSource": {
			reason: "An unknown source is Permanent.",
			cfg:    clusterConfig("", v1alpha1.Credentials{Source: "Magic"}),
			msg:    `unknown credentials.source "Magic"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := NewFactory()(t.Context(), control(t, []byte(tc.key)), tc.cfg)
			if diff := cmp.Diff(backend.ClassPermanent, backend.ClassOf(err)); diff != "" {
				t.Errorf("%s\nfactory class: -want +got:\n%s\nerror: %v", tc.reason, diff, err)
			}
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s\nfactory = %v, want a message containing %q", tc.reason, err, tc.msg)
			}
			if b != nil {
				t.Errorf("%s\nfactory returned a backend with an error", tc.reason)
			}
		})
	}
}

// TestFactoryServiceAccountKey drives the real credentials path: the key in
// the Secret is a service account key the fake trusts; the client signs a
// JWT with it, exchanges it at the fake's token endpoint, and every compute
// call carries the token (the fake refuses calls without one).
func TestFactoryServiceAccountKey(t *testing.T) {
	s := gcpfake.NewTestServer(t, gcpfake.WithRequireAuth())
	key, err := s.NewServiceAccountKey("")
	if err != nil {
		t.Fatal(err)
	}
	kube := control(t, key)
	f := NewFactory(WithCallTimeout(10 * time.Second))
	cfg := config(s.URL(), secretCreds())
	b, err := f(t.Context(), kube, cfg)
	if err != nil {
		t.Fatalf("factory: %v", err)
	}
	d := desired()
	if err := b.Create(t.Context(), d); err != nil {
		t.Fatalf("Create with the key: %v", err)
	}
	if _, err := b.Observe(t.Context(), d); err != nil {
		t.Fatalf("Observe with the key: %v", err)
	}
	if h, ok := b.(backend.HealthChecker); !ok || h.CheckHealth(t.Context()) != nil {
		t.Errorf("the backend must be healthy with a trusted key")
	}
	if s.TokensIssued() == 0 || len(s.Instances()) != 1 {
		t.Errorf("want a token issued and one instance, got %d tokens, %d instances", s.TokensIssued(), len(s.Instances()))
	}
	if again, _ := f(t.Context(), kube, cfg); again != b {
		t.Errorf("the same config and Secret must reuse the backend")
	}

	// A key the token endpoint does not know: every call fails, Permanent.
	other := gcpfake.NewTestServer(t)
	untrusted, err := other.NewServiceAccountKey("")
	if err != nil {
		t.Fatal(err)
	}
	untrusted = []byte(strings.ReplaceAll(string(untrusted), other.URL(), s.URL()))
	sec := &corev1.Secret{}
	if err := kube.Get(t.Context(), client.ObjectKey{Namespace: testConfigNS, Name: testSecret}, sec); err != nil {
		t.Fatal(err)
	}
	sec.Data[testKey] = untrusted
	if err := kube.Update(t.Context(), sec); err != nil {
		t.Fatal(err)
	}
	rotated, err := f(t.Context(), kube, cfg)
	if err != nil || rotated == b {
		t.Fatalf("a rotated Secret must rebuild the backend: %v", err)
	}
	if _, err := b.Observe(t.Context(), d); err == nil {
		t.Errorf("the replaced backend's clients must be closed")
	}
	_, err = rotated.Observe(t.Context(), d)
	if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), "invalid_grant") {
		t.Errorf("Observe with an untrusted key = %v (class %s), want Permanent invalid_grant", err, backend.ClassOf(err))
	}
}

// TestFactoryForeignTokenURI shows a working key whose token_uri names a
// server of the team's choosing refused before the provider posts to it:
// the server sees no request, and no answer of its reaches a condition.
func TestFactoryForeignTokenURI(t *testing.T) {
	s := gcpfake.NewTestServer(t, gcpfake.WithRequireAuth())
	var posts atomic.Int64
	foreign := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		posts.Add(1)
		http.Error(w, "what the metadata server said", http.StatusBadRequest)
	}))
	t.Cleanup(foreign.Close)
	key, err := s.NewServiceAccountKey("")
	if err != nil {
		t.Fatal(err)
	}
	// Another host name than spec.endpoint's (which names 127.0.0.1), the
	// same server: a port of the endpoint's own host would be accepted.
	elsewhere := strings.Replace(foreign.URL, "127.0.0.1", "localhost", 1)
	key = []byte(strings.ReplaceAll(string(key), s.URL()+"/token", elsewhere+"/token"))
	b, err := NewFactory(WithCallTimeout(10*time.Second))(t.Context(), control(t, key), config(s.URL(), secretCreds()))
	if err == nil {
		// Today's provider: the first call fetches a token.
		_, err = b.Observe(t.Context(), desired())
	}
	if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), "names token_uri") {
		t.Errorf("a key with a foreign token_uri: got %v, want a Permanent refusal naming token_uri", err)
	}
	if n := posts.Load(); n != 0 {
		t.Errorf("the provider posted %d times to the key's token_uri", n)
	}
}

// TestFactoryInjectedIdentity uses application default credentials from
// GOOGLE_APPLICATION_CREDENTIALS, as a provider with a mounted key file (or
// workload identity) would.
func TestFactoryInjectedIdentity(t *testing.T) {
	s := gcpfake.NewTestServer(t, gcpfake.WithRequireAuth())
	key, err := s.NewServiceAccountKey("")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "adc.json")
	if err := os.WriteFile(file, key, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", file)
	cfg := clusterConfig(s.URL(), v1alpha1.Credentials{Source: v1alpha1.CredentialsSourceInjectedIdentity})
	b, err := NewFactory()(t.Context(), control(t, nil), cfg)
	if err != nil {
		t.Fatalf("factory: %v", err)
	}
	if h, ok := b.(backend.HealthChecker); !ok || h.CheckHealth(t.Context()) != nil {
		t.Errorf("the backend must work with application default credentials")
	}
}

// TestFactoryAllowedServiceAccounts checks that the config's allowlist
// reaches the backend, and that changing it (a new generation) takes effect.
func TestFactoryAllowedServiceAccounts(t *testing.T) {
	const sa = "proxy@test-project.iam.gserviceaccount.com"
	s := gcpfake.NewTestServer(t, gcpfake.WithRequireAuth())
	key, err := s.NewServiceAccountKey("")
	if err != nil {
		t.Fatal(err)
	}
	kube := control(t, key)
	f := NewFactory(WithCallTimeout(10 * time.Second))
	cfg := config(s.URL(), secretCreds())
	d := desired()
	d.Params.ServiceAccountEmail = ptr.To(sa)

	b, err := f(t.Context(), kube, cfg)
	if err != nil {
		t.Fatalf("factory: %v", err)
	}
	err = b.Create(t.Context(), d)
	want := "spec.forProvider.serviceAccountEmail " + sa + " is not in spec.allowedServiceAccounts or spec.policy.gcp.serviceAccounts of ProviderConfig team-a/gcp"
	if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), want) {
		t.Fatalf("Create with a service account the config does not list = %v, want Permanent containing %q", err, want)
	}

	pc := cfg.Object.(*v1alpha1.ProviderConfig)
	pc.Spec.AllowedServiceAccounts = []string{sa}
	pc.Generation++
	if b, err = f(t.Context(), kube, cfg); err != nil {
		t.Fatalf("factory: %v", err)
	}
	if err := b.Create(t.Context(), d); err != nil {
		t.Fatalf("Create once the config lists the service account: %v", err)
	}
	if insts := s.Instances(); len(insts) != 1 || len(insts[0].GetServiceAccounts()) != 1 || insts[0].GetServiceAccounts()[0].GetEmail() != sa {
		t.Errorf("want one instance running as %s, got %v", sa, insts)
	}

	// spec.policy.gcp reaches the backend too: its service accounts count
	// as listed, and its other lists bound the rest of the spec.
	pc.Spec.AllowedServiceAccounts = nil
	pc.Spec.Policy.GCP = &v1alpha1.GCPPolicy{ServiceAccounts: []string{sa}, MachineTypes: []string{"e2-standard-2"}}
	pc.Generation++
	if b, err = f(t.Context(), kube, cfg); err != nil {
		t.Fatalf("factory: %v", err)
	}
	err = b.Update(t.Context(), d)
	want = `spec.forProvider.machineType "e2-small" is not in ProviderConfig team-a/gcp spec.policy.gcp.machineTypes, which allows "e2-standard-2"`
	if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), want) {
		t.Errorf("Update with a machine type the policy does not list = %v, want Permanent containing %q", err, want)
	}
}

func TestConfigName(t *testing.T) {
	cases := map[string]struct {
		reason string
		obj    client.Object
		want   string
	}{
		"ProviderConfig": {
			reason: "A namespaced config is named with its namespace.",
			obj:    &v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "gcp"}},
			want:   "ProviderConfig team-a/gcp",
		},
		"ClusterProviderConfig": {
			reason: "A cluster config has no namespace.",
			obj:    &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "gcp"}},
			want:   "ClusterProviderConfig gcp",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, configName(proxy.Config{Object: tc.obj})); diff != "" {
				t.Errorf("%s\nconfigName: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
