/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/controller/config"
	"github.com/egressproxy/provider-egressproxy/internal/controller/kubernetesproxy"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// writes counts the provider's writes to the control plane in namespace ns
// (the manager also reconciles what other tests left in theirs) by verb and
// resource (the path without namespace and name).
type writes struct {
	ns string
	mu sync.Mutex
	n  map[string]int
}

func (w *writes) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFn(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodGet && strings.Contains(r.URL.Path, "/namespaces/"+w.ns+"/") {
			w.mu.Lock()
			w.n[r.Method+" "+resourceOf(r.URL.Path)]++
			w.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (w *writes) snapshot() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := make(map[string]int, len(w.n))
	for k, v := range w.n {
		s[k] = v
	}
	return s
}

// resourceOf turns /apis/g/v/namespaces/ns/kind/name/status into kind/status.
func resourceOf(path string) string {
	p := strings.Split(strings.Trim(path, "/"), "/")
	for i, s := range p {
		if s == "namespaces" && i+2 < len(p) {
			p = p[i+2:]
			break
		}
	}
	if len(p) >= 3 {
		return p[0] + "/" + p[2]
	}
	return p[0]
}

type roundTripperFn func(*http.Request) (*http.Response, error)

func (f roundTripperFn) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestWritesPerNewProxy counts what a new proxy costs the control plane
// until it is Ready: every write is a request at 1000 proxies (issue 13).
// The status writes (Creating, then what Observe reports) and those of the
// provider config's controllers are logged, not checked.
func TestWritesPerNewProxy(t *testing.T) {
	e := kube.Shared(t)
	ns := e.Namespace(t, "writes")
	w := &writes{ns: ns, n: map[string]int{}}
	startCounted(t, e, ns, w.wrap)

	const n = 5
	createReady(t, e, ns, n)
	// Whatever follows Ready (a requeue, an event) belongs to converging.
	time.Sleep(3 * time.Second)
	got := w.snapshot()
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%-40s %.2f per proxy", k, float64(got[k])/n)
	}
	// Per new proxy, as crossplane-runtime's managed reconciler makes them:
	// the create-pending annotation (with the finalizer and the external
	// name, which Observe and the name initializer set in memory) and the
	// create-succeeded annotation; the connection Secret, created empty
	// before the instance exists and patched with its details; no
	// generated credentials Secret (the password is derived); no Normal
	// event (off by default here).
	want := map[string]int{
		"PUT kubernetesproxies": 2 * n,
		"POST secrets":          n,
		"PATCH secrets":         n,
		"PUT secrets":           0,
		"POST events":           0,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: want %d for %d new proxies, got %d", k, v, n, got[k])
		}
	}
}

// startCounted starts a manager with the config controllers and the
// KubernetesProxy controller on a memory backend, whose requests go through
// wrap, and a provider config in ns.
func startCounted(t *testing.T, e *kube.Env, ns string, wrap func(http.RoundTripper) http.RoundTripper) {
	t.Helper()
	mem := &memoryBackend{instances: map[string]backend.Desired[params]{}}
	cfg := rest.CopyConfig(e.Config)
	cfg.Wrap(wrap)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     e.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := controller.Options{
		Logger:                  logging.NewLogrLogger(ctrl.Log),
		MaxConcurrentReconciles: 2,
		PollInterval:            time.Hour,
		GlobalRateLimiter:       ratelimiter.NewGlobal(100),
	}
	if err := config.Setup(mgr, o); err != nil {
		t.Fatal(err)
	}
	// Up to date once created: converging, not an update, is measured.
	fns := mem.fns()
	observe := fns.ObserveFn
	fns.ObserveFn = func(ctx context.Context, d backend.Desired[params]) (backend.Observation[obs], error) {
		o, err := observe(ctx, d)
		o.UpToDate = true
		return o, err
	}
	f := func(context.Context, client.Client, proxy.Config) (backend.Backend[params, obs], error) {
		return fns, nil
	}
	if err := kubernetesproxy.Controller.Setup(mgr, proxy.Options{Options: o, ProviderInstance: "test", CredentialsKey: []byte("a test key of thirty-two bytes..")}, f); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(t.Context(), providerConfig(ns)); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(mctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// createReady creates n KubernetesProxies p0, p1, ... in ns and waits until
// each is Ready.
func createReady(t *testing.T, e *kube.Env, ns string, n int) {
	t.Helper()
	for i := range n {
		if err := e.Client.Create(t.Context(), kubernetesProxy(ns, fmt.Sprintf("p%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		nn := types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("p%d", i)}
		kube.Eventually(t, "Ready=True", func() (bool, string) {
			c, err := condition(e.Client, nn, xpv2.TypeReady)
			return err == nil && c.Status == corev1.ConditionTrue, fmt.Sprint(c, err)
		})
	}
}
