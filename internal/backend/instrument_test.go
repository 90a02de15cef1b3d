/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package backend

import (
	"context"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

var _ Backend[struct{}, struct{}] = Fns[struct{}, struct{}]{}

func TestInstrument(t *testing.T) {
	m := NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))

	fake := Fns[struct{}, struct{}]{
		ObserveFn: func(context.Context, Desired[struct{}]) (Observation[struct{}], error) {
			return Observation[struct{}]{}, NotFound(errors.New("no such instance"))
		},
		CreateFn: func(context.Context, Desired[struct{}]) error { return Quota(errors.New("no CPUs left")) },
		UpdateFn: func(context.Context, Desired[struct{}]) error { return nil },
		ListFn:   func(context.Context) ([]Instance, error) { return nil, nil },
	}
	b := Instrument(NewInstrumentation(WithMetrics(m), WithTracer(tp.Tracer("test"))), "gce", Backend[struct{}, struct{}](fake))
	d := Desired[struct{}]{
		Name:        "egp-team-a-proxy-1234abcd",
		Ownership:   Ownership{Owner: Owner{UID: "1234abcd", Namespace: "team-a", Name: "proxy"}, ProviderInstance: "test"},
		Credentials: Credentials{Username: "u", Password: "never-in-a-span"},
	}
	ctx := context.Background()
	_, _ = b.Observe(ctx, d)
	_ = b.Create(ctx, d)
	_ = b.Create(ctx, d)
	_ = b.Update(ctx, d)
	_, _ = b.List(ctx)

	want := `
# HELP egressproxy_backend_calls_total Backend calls by backend, operation and error class (empty class: success).
# TYPE egressproxy_backend_calls_total counter
egressproxy_backend_calls_total{backend="gce",class="",operation="list"} 1
egressproxy_backend_calls_total{backend="gce",class="",operation="update"} 1
egressproxy_backend_calls_total{backend="gce",class="NotFound",operation="observe"} 1
egressproxy_backend_calls_total{backend="gce",class="Quota",operation="create"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "egressproxy_backend_calls_total"); err != nil {
		t.Errorf("calls counter: %v", err)
	}
	if got := testutil.CollectAndCount(m, "egressproxy_backend_call_duration_seconds"); got != 4 {
		t.Errorf("latency histogram: want 4 series (observe, create, update, list), got %d", got)
	}
	var names []string
	for _, s := range spans.Ended() {
		names = append(names, s.Name())
	}
	if diff := cmp.Diff([]string{"backend.observe", "backend.create", "backend.create", "backend.update", "backend.list"}, names); diff != "" {
		t.Errorf("spans: -want, +got:\n%s", diff)
	}
	if got := spans.Ended()[1].Status().Description; got != "no CPUs left" {
		t.Errorf("a failed call's span must carry the error: got %q", got)
	}
	attrs := func(s sdktrace.ReadOnlySpan) map[string]string {
		m := map[string]string{}
		for _, kv := range s.Attributes() {
			m[string(kv.Key)] = kv.Value.Emit()
		}
		return m
	}
	wantCreate := map[string]string{
		"egressproxy.backend":      "gce",
		"egressproxy.operation":    "create",
		"egressproxy.instance":     "egp-team-a-proxy-1234abcd",
		"egressproxy.error_class":  "Quota",
		"egressproxy.mr.namespace": "team-a",
		"egressproxy.mr.name":      "proxy",
		"egressproxy.mr.uid":       "1234abcd",
	}
	if diff := cmp.Diff(wantCreate, attrs(spans.Ended()[1])); diff != "" {
		t.Errorf("a call's span names the backend, operation, error class and managed resource, and no credential: -want, +got:\n%s", diff)
	}
	wantList := map[string]string{"egressproxy.backend": "gce", "egressproxy.operation": "list"}
	if diff := cmp.Diff(wantList, attrs(spans.Ended()[4])); diff != "" {
		t.Errorf("a call for no managed resource names none: -want, +got:\n%s", diff)
	}
}
