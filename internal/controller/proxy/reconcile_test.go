/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/controller/config"
	"github.com/egressproxy/provider-egressproxy/internal/controller/kubernetesproxy"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

func TestMain(m *testing.M) {
	if os.Getenv("TEST_LOG") == "" {
		ctrl.SetLogger(logr.Discard())
	} else {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	}
	os.Exit(kube.Main(m))
}

type (
	params = v1alpha1.KubernetesProxyParameters
	obs    = v1alpha1.KubernetesProxyObservation
)

// memoryBackend is a backend whose instances live in a map, so the test
// sees the managed reconciler, the connector and the external client work
// together on a real API server.
type memoryBackend struct {
	mu        sync.Mutex
	instances map[string]backend.Desired[params]
	createErr error
	deletes   int
}

func (m *memoryBackend) fns() backend.Fns[params, obs] {
	return backend.Fns[params, obs]{
		ObserveFn: func(_ context.Context, d backend.Desired[params]) (backend.Observation[obs], error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			got, ok := m.instances[d.Name]
			if !ok {
				return backend.Observation[obs]{}, backend.NotFound(errors.New("no such instance"))
			}
			return backend.Observation[obs]{
				ID: backend.FormatID("memory", d.Name), State: commonv1alpha1.StateRunning, Ready: true,
				Endpoint: "egress.example:3128", EgressIPs: []string{"203.0.113.7"}, Ownership: got.Ownership,
				UpToDate: fmt.Sprint(got.Proxy) == fmt.Sprint(d.Proxy) && got.Credentials == d.Credentials, Extra: obs{AvailableReplicas: 2},
			}, nil
		},
		CreateFn: func(_ context.Context, d backend.Desired[params]) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.createErr != nil {
				return m.createErr
			}
			m.instances[d.Name] = d
			return nil
		},
		UpdateFn: func(_ context.Context, d backend.Desired[params]) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.instances[d.Name] = d
			return nil
		},
		DeleteFn: func(_ context.Context, d backend.Desired[params]) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.deletes++
			delete(m.instances, d.Name)
			return nil
		},
	}
}

func startProvider(t *testing.T, e *kube.Env, f kubernetesproxy.BackendFactory) {
	t.Helper()
	e.RunManager(t, func(mgr ctrl.Manager, o controller.Options) error {
		if err := config.Setup(mgr, o); err != nil {
			return err
		}
		return kubernetesproxy.Controller.Setup(mgr, proxy.Options{Options: o, ProviderInstance: "test", CredentialsKey: []byte("a test key of thirty-two bytes..")}, f)
	})
}

func providerConfig(ns string) *v1alpha1.ProviderConfig {
	return &v1alpha1.ProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target"},
		Spec: v1alpha1.ProviderConfigSpec{Credentials: v1alpha1.Credentials{
			Source:    v1alpha1.CredentialsSourceSecret,
			SecretRef: &commonv1alpha1.SecretKeySelector{SecretReference: commonv1alpha1.SecretReference{Name: "kubeconfig"}, Key: "kubeconfig"},
		}},
	}
}

func kubernetesProxy(ns, name string) *v1alpha1.KubernetesProxy {
	return &v1alpha1.KubernetesProxy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.KubernetesProxySpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{
				ProviderConfigReference:          &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "target"},
				WriteConnectionSecretToReference: &xpv2.LocalSecretReference{Name: name + "-conn"},
			},
			ForProvider: params{
				// The resource's own: what a config without
				// spec.allowedNamespaces allows.
				Namespace:       ns,
				ProxyParameters: commonv1alpha1.ProxyParameters{AllowedClientCIDRs: []string{"10.0.0.0/8"}},
			},
		},
	}
}

func condition(c client.Client, nn types.NamespacedName, ct xpv2.ConditionType) (xpv2.Condition, error) {
	mg := &v1alpha1.KubernetesProxy{}
	if err := c.Get(context.Background(), nn, mg); err != nil {
		return xpv2.Condition{}, err
	}
	return mg.GetCondition(ct), nil
}

func TestManagedReconcilerLifecycle(t *testing.T) {
	e := kube.Shared(t)
	ns := e.Namespace(t, "lifecycle")
	mem := &memoryBackend{instances: map[string]backend.Desired[params]{}}
	startProvider(t, e, func(context.Context, client.Client, proxy.Config) (backend.Backend[params, obs], error) {
		return mem.fns(), nil
	})
	ctx := t.Context()
	if err := e.Client.Create(ctx, providerConfig(ns)); err != nil {
		t.Fatal(err)
	}
	mg := kubernetesProxy(ns, "proxy")
	if err := e.Client.Create(ctx, mg); err != nil {
		t.Fatal(err)
	}
	nn := types.NamespacedName{Namespace: ns, Name: "proxy"}

	kube.Eventually(t, "Ready=True", func() (bool, string) {
		c, err := condition(e.Client, nn, xpv2.TypeReady)
		return err == nil && c.Status == corev1.ConditionTrue, fmt.Sprint(c, err)
	})
	got := &v1alpha1.KubernetesProxy{}
	if err := e.Client.Get(ctx, nn, got); err != nil {
		t.Fatal(err)
	}
	if ext := got.GetAnnotations()["crossplane.io/external-name"]; !strings.HasPrefix(ext, "egp-") {
		t.Errorf("external name: want the deterministic egp- name, got %q", ext)
	}
	if got.Status.AtProvider.Endpoint != "egress.example:3128" || got.Status.AtProvider.AvailableReplicas != 2 ||
		got.Status.AtProvider.EgressIPs[0] != "203.0.113.7" {
		t.Errorf("status.atProvider: got %+v", got.Status.AtProvider)
	}

	// Connection details reach the Secret, with a working proxy URL and the
	// generated credentials, which are kept in a Secret the resource owns.
	kube.Eventually(t, "the connection Secret", func() (bool, string) {
		s := &corev1.Secret{}
		err := e.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "proxy-conn"}, s)
		return err == nil && strings.HasPrefix(string(s.Data["url"]), "http://egressproxy:"), fmt.Sprint(err)
	})
	// Generated credentials are derived, not stored: no Secret but the
	// connection Secret, which carries what the instance accepts.
	gen := &corev1.Secret{}
	if err := e.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: proxy.GeneratedSecretName(mg, v1alpha1.KubernetesProxyKind)}, gen); !kerrors.IsNotFound(err) {
		t.Errorf("generated credentials must not be stored in a Secret: Get = %v", err)
	}
	first := instancePassword(t, mem)
	if conn := connPassword(ctx, t, e.Client, ns, "proxy-conn"); len(first) != 32 || conn != first {
		t.Errorf("the connection Secret's password %q must be the instance's %q, a generated one", conn, first)
	}

	// The rotation annotation gives the instance a new password, and the
	// connection Secret follows.
	if err := e.Client.Get(ctx, nn, got); err != nil {
		t.Fatal(err)
	}
	meta.AddAnnotations(got, map[string]string{commonv1alpha1.AnnotationKeyCredentialsRotation: "1"})
	if err := e.Client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	kube.Eventually(t, "the rotated password to reach the instance and the connection Secret", func() (bool, string) {
		p, c := instancePassword(t, mem), connPassword(ctx, t, e.Client, ns, "proxy-conn")
		return p != first && len(p) == 32 && c == p, fmt.Sprintf("instance %q, connection Secret %q", p, c)
	})

	// The config counts its user, and is held by it.
	kube.Eventually(t, "the ProviderConfig to count one user", func() (bool, string) {
		pc := &v1alpha1.ProviderConfig{}
		err := e.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "target"}, pc)
		return err == nil && pc.Status.Users == 1 && slices.Contains(pc.GetFinalizers(), config.FinalizerInUse), fmt.Sprint(pc.Status.Users, pc.GetFinalizers(), err)
	})

	// A spec change reaches the backend through Update.
	got.Spec.ForProvider.AllowedDestinations = []string{"api.example.com"}
	if err := e.Client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	kube.Eventually(t, "the allowlist to reach the backend", func() (bool, string) {
		mem.mu.Lock()
		defer mem.mu.Unlock()
		d := mem.instances[got.GetAnnotations()["crossplane.io/external-name"]]
		return len(d.Proxy.AllowedDestinations) == 1, fmt.Sprint(d.Proxy.AllowedDestinations)
	})

	// Delete removes the instance and then the resource.
	if err := e.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	kube.Eventually(t, "the resource to be gone", func() (bool, string) {
		err := e.Client.Get(ctx, nn, &v1alpha1.KubernetesProxy{})
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprint(err)
	})
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if len(mem.instances) != 0 || mem.deletes == 0 {
		t.Errorf("Delete: want the instance deleted, have %d instances after %d deletes", len(mem.instances), mem.deletes)
	}
}

func TestManagedReconcilerErrors(t *testing.T) {
	e := kube.Shared(t)
	ns := e.Namespace(t, "errors")
	quota := &memoryBackend{instances: map[string]backend.Desired[params]{}, createErr: backend.Quota(errors.New("Quota 'CPUS' exceeded. Limit: 8.0"))}
	startProvider(t, e, func(context.Context, client.Client, proxy.Config) (backend.Backend[params, obs], error) {
		return quota.fns(), nil
	})
	ctx := t.Context()
	if err := e.Client.Create(ctx, providerConfig(ns)); err != nil {
		t.Fatal(err)
	}

	cases := map[string]struct {
		reason string
		mg     *v1alpha1.KubernetesProxy
		// wantMessage is part of the Synced=False message; wantProvisioned,
		// when set, the reason of the Provisioned condition.
		wantMessage     string
		wantProvisioned xpv2.ConditionReason
	}{
		"Quota": {
			reason:          "A quota error shows as Synced=False with the backend's message and Provisioned reason QuotaExceeded.",
			mg:              kubernetesProxy(ns, "quota"),
			wantProvisioned: "QuotaExceeded",
			wantMessage:     "Quota 'CPUS' exceeded",
		},
		"MissingConfig": {
			reason: "A missing provider config says which one.",
			mg: func() *v1alpha1.KubernetesProxy {
				mg := kubernetesProxy(ns, "noconfig")
				mg.Spec.ProviderConfigReference.Name = "nope"
				return mg
			}(),
			wantMessage: `cannot get ProviderConfig "nope"`,
		},
		"MissingCredentials": {
			reason: "A credentialsSecretRef to a missing Secret says so, and Provisioned says the error is permanent.",
			mg: func() *v1alpha1.KubernetesProxy {
				mg := kubernetesProxy(ns, "nocreds")
				mg.Spec.ForProvider.CredentialsSecretRef = &commonv1alpha1.LocalSecretReference{Name: "missing"}
				return mg
			}(),
			wantProvisioned: "PermanentError",
			wantMessage:     `cannot get credentialsSecretRef Secret "missing"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := e.Client.Create(ctx, tc.mg); err != nil {
				t.Fatal(err)
			}
			nn := types.NamespacedName{Namespace: ns, Name: tc.mg.GetName()}
			kube.Eventually(t, "Synced=False with the cause", func() (bool, string) {
				c, err := condition(e.Client, nn, xpv2.TypeSynced)
				return err == nil && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, tc.wantMessage), fmt.Sprint(c, err)
			})
			if tc.wantProvisioned != "" {
				kube.Eventually(t, "the Provisioned reason", func() (bool, string) {
					c, err := condition(e.Client, nn, proxy.TypeProvisioned)
					return err == nil && c.Reason == tc.wantProvisioned, fmt.Sprint(c, err)
				})
			}
		})
	}
}

func TestBackendNotBuiltIn(t *testing.T) {
	e := kube.Shared(t)
	ns := e.Namespace(t, "nobackend")
	startProvider(t, e, nil)
	ctx := t.Context()
	if err := e.Client.Create(ctx, providerConfig(ns)); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(ctx, kubernetesProxy(ns, "proxy")); err != nil {
		t.Fatal(err)
	}
	kube.Eventually(t, "a clear Synced=False message", func() (bool, string) {
		c, err := condition(e.Client, types.NamespacedName{Namespace: ns, Name: "proxy"}, xpv2.TypeSynced)
		return err == nil && strings.Contains(c.Message, "the kubernetes backend is not available in this build"), fmt.Sprint(c, err)
	})
}

// instancePassword is the password of mem's only instance.
func instancePassword(t *testing.T, mem *memoryBackend) string {
	t.Helper()
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if len(mem.instances) != 1 {
		t.Fatalf("want one instance, got %d", len(mem.instances))
	}
	for _, d := range mem.instances {
		return d.Credentials.Password
	}
	return ""
}

// connPassword is the password in the connection Secret name.
func connPassword(ctx context.Context, t *testing.T, c client.Client, ns, name string) string {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return string(s.Data[proxy.ConnectionPassword])
}
