/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
)

type (
	kparams = v1alpha1.KubernetesProxyParameters
	kobs    = v1alpha1.KubernetesProxyObservation
)

func TestCollect(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const ours = "provider-egressproxy-0b3c1e0e-5f3a-4c1e-9a57-1a2b3c4d5e6f"
	instance := func(name string, uid types.UID, pi string, age time.Duration) backend.Instance {
		in := backend.Instance{
			ID: "memory://" + name, Name: "egp-" + name,
			Ownership: backend.Ownership{Owner: backend.Owner{UID: uid}, ProviderInstance: pi},
		}
		if age > 0 {
			in.CreatedAt = now.Add(-age)
		}
		return in
	}
	// A backend reports parts it found without ownership (volumes whose
	// domain is gone) as Terminated.
	terminated := func(in backend.Instance) backend.Instance {
		in.State = commonv1alpha1.StateTerminated
		return in
	}
	type want struct {
		deleted []string
		result  string
	}
	cases := map[string]struct {
		reason string
		in     backend.Instance
		want   want
	}{
		"OurOrphan": {
			reason: "An old instance of this provider instance whose resource is gone is deleted.",
			in:     instance("orphan", "gone", ours, 2*time.Hour),
			want:   want{deleted: []string{"egp-orphan"}, result: "deleted"},
		},
		"AnotherInstallation": {
			reason: "An orphan of another installation sharing the backend is never deleted.",
			in:     instance("theirs", "gone", "provider-egressproxy-9d1e2f3a-0000-4c1e-9a57-1a2b3c4d5e6f", 2*time.Hour),
			want:   want{result: "skipped_foreign"},
		},
		"OldDefault": {
			reason: "An orphan labelled with the old shared default is another installation's.",
			in:     instance("default", "gone", "default", 2*time.Hour),
			want:   want{result: "skipped_foreign"},
		},
		"Unlabelled": {
			reason: "A part without ownership is never deleted, however old.",
			in:     terminated(instance("unlabelled", "", "", 2*time.Hour)),
			want:   want{result: "skipped_foreign"},
		},
		"ZeroCreationTime": {
			reason: "An instance whose creation time was not read back is never deleted.",
			in:     instance("unknown-age", "gone", ours, 0),
			want:   want{result: "skipped_young"},
		},
		"Young": {
			reason: "A young instance is kept: its resource may not be in the cache yet.",
			in:     instance("young", "gone", ours, time.Minute),
			want:   want{result: "skipped_young"},
		},
		"LiveOwner": {
			reason: "An instance whose resource exists is kept.",
			in:     instance("alive", "alive", ours, 2*time.Hour),
			want:   want{result: "skipped_live"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var deleted []string
			b := backend.Fns[kparams, kobs]{
				ListFn: func(context.Context) ([]backend.Instance, error) { return []backend.Instance{tc.in}, nil },
				DeleteFn: func(_ context.Context, d backend.Desired[kparams]) error {
					deleted = append(deleted, d.Name)
					return nil
				},
			}
			// Both configs reach the same backend: an instance is judged,
			// counted and deleted once.
			c, configs := collector(t, "test-"+name, ours, b)
			c.now = func() time.Time { return now }
			n, err := c.Collect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want.deleted, deleted); diff != "" {
				t.Errorf("%s\ndeleted: -want, +got:\n%s", tc.reason, diff)
			}
			if n != len(tc.want.deleted) || *configs != 2 {
				t.Errorf("Collect: want %d deletions over 2 configs, got %d over %d", len(tc.want.deleted), n, *configs)
			}
			if got := testutil.ToFloat64(gcInstances.WithLabelValues("test-"+name, tc.want.result)); got != 1 {
				t.Errorf("%s\negressproxy_gc_instances_total{result=%q}: want 1, got %v", tc.reason, tc.want.result, got)
			}
		})
	}
}

func TestCollectErrors(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	orphan := backend.Instance{
		ID: "memory://orphan", Name: "egp-orphan", CreatedAt: now.Add(-2 * time.Hour),
		Ownership: backend.Ownership{Owner: backend.Owner{UID: "gone"}, ProviderInstance: "ours"},
	}
	var deleted []string
	b := backend.Fns[kparams, kobs]{
		ListFn: func(context.Context) ([]backend.Instance, error) { return nil, errors.New("unreachable") },
		DeleteFn: func(_ context.Context, d backend.Desired[kparams]) error {
			deleted = append(deleted, d.Name)
			return errors.New("refused")
		},
	}
	c, _ := collector(t, "test-errors", "ours", b)
	c.now = func() time.Time { return now }

	// A backend that cannot list is skipped, never taken as empty.
	if _, err := c.Collect(context.Background()); err == nil || len(deleted) != 0 {
		t.Errorf("Collect with a failing List: want an error and no deletion, got %v and %v", err, deleted)
	}

	// A failed Delete is reported and counted.
	c.newBackend = func(context.Context, client.Client, Config) (backend.Backend[kparams, kobs], error) {
		b.ListFn = func(context.Context) ([]backend.Instance, error) { return []backend.Instance{orphan}, nil }
		return b, nil
	}
	if n, err := c.Collect(context.Background()); err == nil || n != 0 {
		t.Errorf("Collect with a failing Delete: want an error and 0 deletions, got %v and %d", err, n)
	}
	if got := testutil.ToFloat64(gcInstances.WithLabelValues("test-errors", "error")); got != 1 {
		t.Errorf("egressproxy_gc_instances_total{result=\"error\"}: want 1, got %v", got)
	}
}

// TestCollectHungConfig shows one config whose backend never answers (a
// libvirt host that accepts and stays silent) costs the others nothing: each
// config has its own deadline, not one for the whole round.
func TestCollectHungConfig(t *testing.T) {
	orphan := backend.Instance{
		ID: "memory://orphan", Name: "egp-orphan", CreatedAt: time.Now().Add(-2 * time.Hour),
		Ownership: backend.Ownership{Owner: backend.Owner{UID: "gone"}, ProviderInstance: "ours"},
	}
	hung := backend.Fns[kparams, kobs]{ListFn: func(ctx context.Context) ([]backend.Instance, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	var deleted []string
	healthy := backend.Fns[kparams, kobs]{
		ListFn: func(ctx context.Context) ([]backend.Instance, error) { return []backend.Instance{orphan}, ctx.Err() },
		DeleteFn: func(ctx context.Context, d backend.Desired[kparams]) error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			deleted = append(deleted, d.Name)
			return nil
		},
	}
	c, _ := collector(t, "test-hung", "ours", nil)
	c.timeout = 200 * time.Millisecond
	c.newBackend = func(_ context.Context, _ client.Client, cfg Config) (backend.Backend[kparams, kobs], error) {
		if cfg.Object.GetName() == "pc" {
			return hung, nil
		}
		return healthy, nil
	}
	// The round's own bound, as Start's context is the manager's.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	n, err := c.Collect(ctx)
	if n != 1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Collect with one hung config: deleted %d (%v), error %v; want the other config's orphan deleted and the hung one reported", n, deleted, err)
	}
}

// collector returns a Collector over a fake API server holding one live
// KubernetesProxy (UID alive) and two provider configs that both reach b,
// and a pointer to how many backends it made.
func collector(t *testing.T, name, instance string, b backend.Backend[kparams, kobs]) (*Collector[kparams, kobs], *int) {
	t.Helper()
	s := runtime.NewScheme()
	if err := registry.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&v1alpha1.KubernetesProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "alive", UID: "alive"}},
		&v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "pc"}},
		&v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "cpc"}},
	).Build()
	configs := 0
	c := NewCollector(CollectorConfig[kparams, kobs]{
		Backend: name,
		Kube:    kube,
		NewBackend: func(context.Context, client.Client, Config) (backend.Backend[kparams, kobs], error) {
			configs++
			return b, nil
		},
		NewOwners: func() client.ObjectList { return &v1alpha1.KubernetesProxyList{} },
		NewConfigs: func() (client.ObjectList, client.ObjectList) {
			return &v1alpha1.ProviderConfigList{}, &v1alpha1.ClusterProviderConfigList{}
		},
	}, Options{ProviderInstance: instance, GCMinAge: time.Hour, GCInterval: time.Minute})
	c.log = logging.NewNopLogger()
	return c, &configs
}

// TestCollectIsInstrumented shows GC's List and Delete counted as backend
// calls, like the reconcilers' own: a platform team sees GC in the same
// metrics and traces.
func TestCollectIsInstrumented(t *testing.T) {
	old := time.Now().Add(-2 * time.Hour)
	b := &backend.Fns[kparams, kobs]{
		ListFn: func(context.Context) ([]backend.Instance, error) {
			return []backend.Instance{{
				ID: "kubernetes://h:1/ns/orphan", Name: "orphan", CreatedAt: old,
				Ownership: backend.Ownership{Owner: backend.Owner{UID: "gone"}, ProviderInstance: "ours"},
			}}, nil
		},
		DeleteFn: func(context.Context, backend.Desired[kparams]) error { return nil },
	}
	c, _ := collector(t, "kubernetes", "ours", b)
	m := backend.NewMetrics()
	c.instr = backend.NewInstrumentation(backend.WithMetrics(m))
	if _, err := c.Collect(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Two configs reach the same backend: two Lists, one Delete (the
	// instance is collected once).
	want := `
# HELP egressproxy_backend_calls_total Backend calls by backend, operation and error class (empty class: success).
# TYPE egressproxy_backend_calls_total counter
egressproxy_backend_calls_total{backend="kubernetes",class="",operation="delete"} 1
egressproxy_backend_calls_total{backend="kubernetes",class="",operation="list"} 2
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), "egressproxy_backend_calls_total"); err != nil {
		t.Errorf("Collect(...): backend call metrics: %v", err)
	}
}
