/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
)

// closer counts its Close calls, as a backend with informers stops them.
type closer struct{ closed int }

func (c *closer) Close() error { c.closed++; return nil }

// TestClientCacheCloses shows that a backend replaced by a rebuild (a
// changed provider config) or forgotten is closed, so the informers of a
// watching backend stop with it; the backend in use is not.
func TestClientCacheCloses(t *testing.T) {
	cases := map[string]struct {
		reason string
		then   func(c *ClientCache[*closer], build func() (*closer, error))
		want   []int
	}{
		"SameVersion": {
			reason: "The backend of an unchanged config is reused, not closed.",
			then: func(c *ClientCache[*closer], build func() (*closer, error)) {
				_, _ = c.Get("pc", "1/", build)
			},
			want: []int{0},
		},
		"Rebuilt": {
			reason: "A new version closes the old backend once; the new one stays open.",
			then: func(c *ClientCache[*closer], build func() (*closer, error)) {
				_, _ = c.Get("pc", "2/", build)
			},
			want: []int{1, 0},
		},
		"Forgotten": {
			reason: "Forget closes the backend.",
			then:   func(c *ClientCache[*closer], _ func() (*closer, error)) { c.Forget("pc") },
			want:   []int{1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var built []*closer
			c := NewClientCache[*closer]()
			build := func() (*closer, error) { b := &closer{}; built = append(built, b); return b, nil }
			if _, err := c.Get("pc", "1/", build); err != nil {
				t.Fatal(err)
			}
			tc.then(c, build)
			got := []int{}
			for _, b := range built {
				got = append(got, b.closed)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nClose calls per built backend: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestDeletedConfigClosesBackend shows the backend of a deleted provider
// config closed (its informers, connections and goroutines with it), as
// the informer of configs reports the deletion, also as a tombstone; the
// backend of a config that stays is not.
func TestDeletedConfigClosesBackend(t *testing.T) {
	s := runtime.NewScheme()
	if err := registry.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	desc, ok := registry.Backends.Lookup("kubernetes")
	if !ok {
		t.Fatal("no kubernetes backend in registry.Backends")
	}
	informers := &informertest.FakeInformers{Scheme: s}
	d := &Deletions{}
	if err := (Controller[*v1alpha1.KubernetesProxy, kparams, kobs]{Backend: desc}).forgetDeleted(informers, s, d); err != nil {
		t.Fatal(err)
	}
	c := NewClientCache[*closer]()
	c.ForgetOn(d)

	pc := &v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "pc", UID: "uid-pc"}}
	cpc := &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "cpc", UID: "uid-cpc"}}
	stays := &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "stays", UID: "uid-stays"}}
	built := map[string]*closer{}
	for _, o := range []client.Object{pc, cpc, stays} {
		cfg := Config{Object: o}
		if _, err := c.Get(cfg.CacheKey(), cfg.CacheVersion(""), func() (*closer, error) {
			built[o.GetName()] = &closer{}
			return built[o.GetName()], nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	fpc, err := informers.FakeInformerFor(t.Context(), pc)
	if err != nil {
		t.Fatal(err)
	}
	fpc.Delete(pc)
	// A delete missed while the watch was down comes as a tombstone.
	d.handler().OnDelete(toolscache.DeletedFinalStateUnknown{Key: "cpc", Obj: cpc})

	got := map[string]int{}
	for name, b := range built {
		got[name] = b.closed
	}
	if diff := cmp.Diff(map[string]int{"pc": 1, "cpc": 1, "stays": 0}, got); diff != "" {
		t.Errorf("Close calls per config after deleting pc and cpc: -want, +got:\n%s", diff)
	}
}
