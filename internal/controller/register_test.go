/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/gate"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/customresourcesgate"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	// The memory backend reuses the Go types of another backend's API
	// under an API group of its own: writing new types would need
	// generated code, and the point is the wiring, not the types.
	reuse "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kubernetes/kubernetesdesc"
	controllers "github.com/egressproxy/provider-egressproxy/internal/controller"
	"github.com/egressproxy/provider-egressproxy/internal/controller/config"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// The memory backend: a test-only backend whose instances live in a map.
// Everything a real backend has outside its own folders is here: its
// description (memoryBackend, which would go into registry.Backends) and its
// controller side (memoryController, which would go into
// cmd/provider/backends.go).

var memoryGroup = schema.GroupVersion{Group: "memory.m.egressproxy.test", Version: "v1alpha1"}

type (
	params = reuse.KubernetesProxyParameters
	obs    = reuse.KubernetesProxyObservation
)

var memoryBackend = backend.Description{
	Name:          "memory",
	Managed:       memoryGroup.WithKind("MemoryProxy"),
	MaxNameLength: 63,
	AddToScheme:   addMemoryTypes,
	// Its configs are the kubernetes backend's types, and so is its policy.
	Policy: kubernetesdesc.Backend.Policy,
}

func memoryController(m *memory) proxy.Controller[*reuse.KubernetesProxy, params, obs] {
	return proxy.Controller[*reuse.KubernetesProxy, params, obs]{
		Backend: memoryBackend,
		Kind:    memoryKind{},
		Factory: func(*kingpin.Application) func(proxy.Env) proxy.BackendFactory[params, obs] {
			return func(proxy.Env) proxy.BackendFactory[params, obs] {
				return func(context.Context, client.Client, proxy.Config) (backend.Backend[params, obs], error) {
					return m, nil
				}
			}
		},
	}
}

// addMemoryTypes registers the reused types under the memory group's kinds.
func addMemoryTypes(s *runtime.Scheme) error {
	for kind, o := range map[string]runtime.Object{
		"MemoryProxy":               &reuse.KubernetesProxy{},
		"MemoryProxyList":           &reuse.KubernetesProxyList{},
		"ProviderConfig":            &reuse.ProviderConfig{},
		"ProviderConfigList":        &reuse.ProviderConfigList{},
		"ClusterProviderConfig":     &reuse.ClusterProviderConfig{},
		"ClusterProviderConfigList": &reuse.ClusterProviderConfigList{},
	} {
		s.AddKnownTypeWithName(memoryGroup.WithKind(kind), o)
	}
	metav1.AddToGroupVersion(s, memoryGroup)
	return nil
}

type memoryKind struct{}

func (memoryKind) Proxy(mg *reuse.KubernetesProxy) commonv1alpha1.ProxyParameters {
	return mg.Spec.ForProvider.ProxyParameters
}
func (memoryKind) Params(mg *reuse.KubernetesProxy) params { return mg.Spec.ForProvider }
func (memoryKind) SetObservation(mg *reuse.KubernetesProxy, o backend.Observation[obs]) {
	mg.Status.AtProvider.ProxyObservation = proxy.CommonObservation(o)
}
func (memoryKind) MaxNameLength() int { return memoryBackend.MaxNameLength }

// memory keeps instances in a map. An instance serves as soon as it is
// created.
type memory struct {
	mu        sync.Mutex
	instances map[string]backend.Instance
	deleted   int
}

func (m *memory) Observe(_ context.Context, d backend.Desired[params]) (backend.Observation[obs], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, ok := m.instances[d.Name]
	if !ok {
		return backend.Observation[obs]{}, backend.NotFound(errors.Errorf("no instance %s", d.Name))
	}
	return backend.Observation[obs]{
		ID: i.ID, State: i.State, Ready: true, Endpoint: "127.0.0.1:3128",
		CreatedAt: i.CreatedAt, Ownership: i.Ownership, UpToDate: true,
	}, nil
}

func (m *memory) Create(_ context.Context, d backend.Desired[params]) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.instances[d.Name]; !ok {
		m.instances[d.Name] = backend.Instance{
			ID: backend.FormatID("memory", d.Name), Name: d.Name, Ownership: d.Ownership,
			CreatedAt: time.Now(), State: commonv1alpha1.StateRunning,
		}
	}
	return nil
}

func (m *memory) Update(context.Context, backend.Desired[params]) error { return nil }

func (m *memory) Delete(_ context.Context, d backend.Desired[params]) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.instances[d.Name]; ok {
		delete(m.instances, d.Name)
		m.deleted++
	}
	return nil
}

func (m *memory) List(context.Context) ([]backend.Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]backend.Instance, 0, len(m.instances))
	for _, i := range m.instances {
		out = append(out, i)
	}
	return out, nil
}

func (m *memory) count() (live, deleted int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.instances), m.deleted
}

// memoryCRDs are the kubernetes backend's CRDs moved to the memory group,
// made at run time rather than kept as files.
func memoryCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	r := strings.NewReplacer("kubernetes.m.egressproxy.io", memoryGroup.Group,
		"KubernetesProxy", "MemoryProxy", "kubernetesproxies", "memoryproxies", "kubernetesproxy", "memoryproxy")
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, plural := range []string{"kubernetesproxies", "providerconfigs", "clusterproviderconfigs"} {
		b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "package", "provider", "crds", "kubernetes.m.egressproxy.io_"+plural+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal([]byte(r.Replace(string(b))), crd); err != nil {
			t.Fatal(err)
		}
		out = append(out, crd)
	}
	return out
}

// startMemoryProvider runs a manager with the memory backend wired by its
// one registration line, workers workers a managed resource controller and
// safe-start's CRD gate, until the test ends; the backend's controllers
// start once its CRDs are installed. It returns the manager's scheme.
func startMemoryProvider(t *testing.T, e *kube.Env, m *memory, workers int) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, memoryBackend.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}

	// The one registration line.
	registrations := []proxy.Registration{memoryController(m)}

	app := kingpin.New("test", "")
	wire := controllers.Wire(app, registrations)
	if _, err := app.Parse(nil); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:     s,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&apiextensionsv1.CustomResourceDefinition{}: {Transform: customresourcesgate.TransformStripCRDSchema},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := proxy.Options{
		Options: controller.Options{
			Logger:                  logging.NewLogrLogger(ctrl.Log),
			MaxConcurrentReconciles: workers,
			PollInterval:            time.Second,
			GlobalRateLimiter:       ratelimiter.NewGlobal(100),
			Gate:                    new(gate.Gate[schema.GroupVersionKind]),
		},
		ProviderInstance: "envtest",
		CredentialsKey:   []byte("a test key of thirty-two bytes.."),
		Timeout:          time.Minute,
	}
	if err := controllers.Setup(mgr, o, wire(proxy.Env{})); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(mctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// TestConfigControllerWorkers: the managed resources' controller gets
// --max-reconcile-rate workers, each config controller config.Workers.
// Every worker is a goroutine for the provider's life; at a rate of 100
// the config controllers' idle workers were 5 MB of stacks.
func TestConfigControllerWorkers(t *testing.T) {
	e := kube.Start(t)
	ctrl.SetLogger(logr.Discard())
	const workers = 50
	startMemoryProvider(t, e, &memory{instances: map[string]backend.Instance{}}, workers)
	if _, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{CRDs: memoryCRDs(t)}); err != nil {
		t.Fatal(err)
	}

	// The managed resources' controller; three of configs: the users of
	// ProviderConfigs, of ClusterProviderConfigs, and InUse; the CRD gate.
	want := workers + 3*config.Workers + 1
	kube.Eventually(t, fmt.Sprintf("%d idle workers", want), func() (bool, string) {
		got := idleWorkers(t)
		return got == want, fmt.Sprintf("%d idle workers", got)
	})
}

// idleWorkers counts the goroutines waiting for an item of a controller's
// work queue.
func idleWorkers(t *testing.T) int {
	t.Helper()
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	// debug=1 groups goroutines by stack: "<count> @ <pcs>", then a line
	// per frame.
	n, count := 0, 0
	for _, l := range strings.Split(b.String(), "\n") {
		if _, err := fmt.Sscanf(l, "%d @", &count); err == nil {
			continue
		}
		if strings.Contains(l, "priorityqueue.(*priorityqueue[...]).GetWithPriority") {
			n += count
			count = 0
		}
	}
	return n
}

// TestTestOnlyBackend wires a backend by its one registration line and runs
// it through the real managed reconciler on a real API server, with the
// CRD gate of safe-start: the backend's controllers start only once its
// CRDs are installed, after the manager.
func TestTestOnlyBackend(t *testing.T) {
	e := kube.Start(t)
	ctrl.SetLogger(logr.Discard())
	ctx := t.Context()
	m := &memory{instances: map[string]backend.Instance{}}
	s := startMemoryProvider(t, e, m, 2)

	// Safe-start: the CRDs come after the provider started.
	if _, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{CRDs: memoryCRDs(t)}); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(e.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ns := e.Namespace(t, "team")
	if err := c.Create(ctx, &reuse.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "memory-" + ns},
		Spec:       reuse.ProviderConfigSpec{Credentials: reuse.Credentials{Source: reuse.CredentialsSourceInjectedIdentity}},
	}); err != nil {
		t.Fatal(err)
	}
	mg := &reuse.KubernetesProxy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "proxy"},
		Spec: reuse.KubernetesProxySpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{
				ProviderConfigReference:          &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "memory-" + ns},
				WriteConnectionSecretToReference: &xpv2.LocalSecretReference{Name: "proxy-conn"},
			},
			// The reused schema asks for a namespace; the memory backend
			// ignores it, and the reused config's policy allows the
			// resource's own.
			ForProvider: params{Namespace: ns, ProxyParameters: commonv1alpha1.ProxyParameters{
				AllowedClientCIDRs:  []string{"10.0.0.0/8"},
				AllowedDestinations: []string{"api.example.com"},
			}},
		},
	}
	if err := c.Create(ctx, mg); err != nil {
		t.Fatal(err)
	}

	nn := types.NamespacedName{Namespace: ns, Name: "proxy"}
	kube.Eventually(t, "Ready=True", func() (bool, string) {
		got := &reuse.KubernetesProxy{}
		if err := c.Get(ctx, nn, got); err != nil {
			return false, err.Error()
		}
		r, s := got.GetCondition(xpv2.TypeReady), got.GetCondition(xpv2.TypeSynced)
		return r.Status == corev1.ConditionTrue && s.Status == corev1.ConditionTrue, fmt.Sprint(r, s, got.Status.AtProvider)
	})
	if live, _ := m.count(); live != 1 {
		t.Errorf("instances after Create: want 1, got %d", live)
	}
	conn := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "proxy-conn"}, conn); err != nil {
		t.Fatal(err)
	}
	if got := string(conn.Data[proxy.ConnectionEndpoint]); got != "127.0.0.1:3128" {
		t.Errorf("connection endpoint: want 127.0.0.1:3128, got %q", got)
	}

	if err := c.Delete(ctx, mg); err != nil {
		t.Fatal(err)
	}
	kube.Eventually(t, "the managed resource gone", func() (bool, string) {
		err := c.Get(ctx, nn, &reuse.KubernetesProxy{})
		return kerrors.IsNotFound(err), fmt.Sprint(err)
	})
	if live, deleted := m.count(); live != 0 || deleted != 1 {
		t.Errorf("instances after Delete: want 0 live, 1 deleted; got %d live, %d deleted", live, deleted)
	}
}
