/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"maps"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	kubeenv "github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// roundTripper counts the reads that are not watches.
type roundTripper struct {
	next  http.RoundTripper
	reads *atomic.Int64
}

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && req.URL.Query().Get("watch") != "true" {
		r.reads.Add(1)
	}
	return r.next.RoundTrip(req)
}

// watchingCluster returns a backend with a watch cache whose reads (but
// not watches) are counted, the test's client and a fresh namespace.
func watchingCluster(t *testing.T) (*Backend, *kubeenv.Env, string, *atomic.Int64) {
	t.Helper()
	env := kubeenv.Shared(t)
	reads := &atomic.Int64{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return roundTripper{next: rt, reads: reads} }
	b, err := NewForConfig(cfg)
	step(t, "NewForConfig", err)
	t.Cleanup(func() { _ = b.Close() })
	return b, env, env.Namespace(t, "watch"), reads
}

// eventually retries fn every 100 ms until it returns true or 20 s passed.
func eventually(t *testing.T, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestIntegrationWatchCacheServesPolls(t *testing.T) {
	b, env, ns, reads := watchingCluster(t)
	ctx := t.Context()
	d := desired(inNamespace(ns))
	step(t, "Create", b.Create(ctx, d))
	// A running proxy: its pods (labelled as the Deployment's template
	// labels them) on a node with an address, read for the egress IPs.
	readyPodOn(ctx, t, env.Client, ns, ns+"-node", "203.0.113.9")
	pods := &corev1.PodList{}
	step(t, "list pods", env.Client.List(ctx, pods, client.InNamespace(ns)))
	for i := range pods.Items {
		p := &pods.Items[i]
		maps.Copy(p.Labels, d.Ownership.Labels(backend.KubernetesLabelKeys))
		step(t, "label pod", env.Client.Update(ctx, p))
	}
	markAvailable(ctx, t, env.Client, ns, 2)

	// The first Observe starts the informers; once they synced and
	// delivered Create's writes, a poll reads nothing.
	eventually(t, "a poll reads nothing from the API server", func() bool {
		before := reads.Load()
		o := observe(ctx, t, b, d)
		if !o.UpToDate {
			t.Fatalf("Observe after Create: not up to date: %s", o.Diff)
		}
		return reads.Load() == before && len(o.EgressIPs) == 1
	})

	// An Update with nothing to change (a retry, a drift already repaired)
	// reads nothing either: the cache holds every part as wanted.
	before := reads.Load()
	step(t, "Update", b.Update(ctx, d))
	if n := reads.Load() - before; n != 0 {
		t.Errorf("an Update with nothing to change read %d times from the API server, want 0", n)
	}

	// Observe right after an Update sees the Update, not the cache of
	// before it.
	changed := desired(inNamespace(ns), withDestinations(".example.org"))
	step(t, "Update", b.Update(ctx, changed))
	if o := observe(ctx, t, b, changed); !o.UpToDate {
		t.Errorf("Observe right after Update: not up to date: %s", o.Diff)
	}
}

func TestIntegrationWatchReportsChanges(t *testing.T) {
	b, env, ns, _ := watchingCluster(t)
	ctx := t.Context()
	d := desired(inNamespace(ns))
	got := make(chan backend.Ownership, 100)
	b.Watch(func(o backend.Ownership) { got <- o })
	step(t, "Create", b.Create(ctx, d))
	observe(ctx, t, b, d)
	eventually(t, "the informers synced", func() bool {
		// Until then, Create's own writes may or may not be reported.
		return b.watch.reader(objectKey{kind: reflect.TypeOf(&appsv1.Deployment{})}) != b.watch.direct
	})
	drain(got)

	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: d.Name}}
	step(t, "delete Deployment", env.Client.Delete(ctx, dep))
	select {
	case o := <-got:
		if diff := cmp.Diff(d.Ownership, o); diff != "" {
			t.Errorf("reported ownership: -want, +got:\n%s", diff)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the deletion of the Deployment was not reported within 10 s")
	}
}

func TestIntegrationWatchCacheClose(t *testing.T) {
	b, _, ns, _ := watchingCluster(t)
	ctx := t.Context()
	d := desired(inNamespace(ns))
	step(t, "Create", b.Create(ctx, d))
	observe(ctx, t, b, d)
	if n := informerGoroutines(); n == 0 {
		t.Fatal("no informer goroutines after the first Observe: the cache did not start")
	}
	step(t, "Close", b.Close())
	eventually(t, "no informer goroutine is left", func() bool { return informerGoroutines() == 0 })

	// A closed backend still answers, from the API server.
	if o := observe(ctx, t, b, d); !o.UpToDate {
		t.Errorf("Observe after Close: not up to date: %s", o.Diff)
	}
	if n := informerGoroutines(); n != 0 {
		t.Errorf("Observe after Close started %d informer goroutines", n)
	}
}

// informerGoroutines counts the goroutines of reflectors and informers.
func informerGoroutines() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "k8s.io/client-go/tools/cache.(*Reflector)") || strings.Contains(g, "k8s.io/client-go/tools/cache.(*sharedIndexInformer)") {
			n++
		}
	}
	return n
}

func drain(c chan backend.Ownership) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}
