/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubernetesv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
)

// receiver is an in-process OTLP collector: it keeps every export request.
type receiver struct {
	coltracepb.UnimplementedTraceServiceServer

	mu   sync.Mutex
	reqs []*coltracepb.ExportTraceServiceRequest
}

func (r *receiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// ServeHTTP is OTLP/HTTP with protobuf bodies, the exporter's default.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
		return
	}
	in := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(body, in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out, _ := r.Export(req.Context(), in)
	b, _ := proto.Marshal(out)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

// serveHTTP starts r as an OTLP/HTTP endpoint on loopback.
func serveHTTP(t *testing.T, r *receiver) string {
	t.Helper()
	s := httptest.NewServer(r)
	t.Cleanup(s.Close)
	return s.URL
}

// serveGRPC starts r as an OTLP/gRPC endpoint on loopback.
func serveGRPC(t *testing.T, r *receiver) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(s, r)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	// The http scheme tells the gRPC exporter to use no TLS.
	return "http://" + l.Addr().String()
}

// span is what a test asserts of one exported span.
type span struct {
	Name   string
	Parent string // The parent's name; empty for a root.
	Attrs  map[string]string
	Error  bool
}

func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	}
	return v.String()
}

// tree flattens what r received, naming each span's parent, and returns
// the service name of the resource the spans came from.
func (r *receiver) tree(t *testing.T) ([]span, string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []*tracepb.Span
	service := ""
	for _, req := range r.reqs {
		for _, rs := range req.GetResourceSpans() {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.GetKey() == "service.name" {
					service = value(a.GetValue())
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				all = append(all, ss.GetSpans()...)
			}
		}
	}
	byID := map[string]*tracepb.Span{}
	for _, s := range all {
		byID[hex.EncodeToString(s.GetSpanId())] = s
	}
	out := make([]span, 0, len(all))
	for _, s := range all {
		got := span{Name: s.GetName(), Attrs: map[string]string{}, Error: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR}
		if len(s.GetParentSpanId()) > 0 {
			p, ok := byID[hex.EncodeToString(s.GetParentSpanId())]
			if !ok {
				t.Errorf("span %s: its parent was not exported", s.GetName())
				continue
			}
			if !bytes.Equal(p.GetTraceId(), s.GetTraceId()) {
				t.Errorf("span %s: not in its parent's trace", s.GetName())
			}
			got.Parent = p.GetName()
		}
		for _, a := range s.GetAttributes() {
			got.Attrs[a.GetKey()] = value(a.GetValue())
		}
		out = append(out, got)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, service
}

// clearOTelEnv makes the test independent of the OTEL_* variables of
// whoever runs it.
func clearOTelEnv(t *testing.T) {
	for _, k := range []string{envEndpoint, envTracesEndpoint, envProtocol, envTracesProtocol, envSDKDisabled, envTracesExporter, "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		t.Setenv(k, "")
	}
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
}

// TestSetupExportsSpanTree runs the reconcile-side wiring of the provider
// (proxy.Traced around an external client, backend.Instrument with the
// global tracer) under setupTracing and asserts what an OTLP collector
// receives: one trace per external client call, its backend calls as
// children, the managed resource's identity and never a credential.
func TestSetupExportsSpanTree(t *testing.T) {
	const password = "never-in-a-span"
	mr := &kubernetesv1alpha1.KubernetesProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "proxy", UID: "0b8f0e54-3d1c-4f57-9e0a-6f1d2c3b4a59"}}
	identity := map[string]string{
		"egressproxy.backend":      "kubernetes",
		"egressproxy.mr.namespace": "team-a",
		"egressproxy.mr.name":      "proxy",
		"egressproxy.mr.uid":       "0b8f0e54-3d1c-4f57-9e0a-6f1d2c3b4a59",
	}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range identity {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	want := []span{
		{Name: "backend.create", Parent: "reconcile.create", Error: true, Attrs: with("egressproxy.operation", "create", "egressproxy.instance", "egp-team-a-proxy", "egressproxy.error_class", "Quota")},
		{Name: "backend.observe", Parent: "reconcile.observe", Attrs: with("egressproxy.operation", "observe", "egressproxy.instance", "egp-team-a-proxy")},
		{Name: "reconcile.create", Error: true, Attrs: with("egressproxy.operation", "create", "egressproxy.mr.kind", "KubernetesProxy", "egressproxy.error_class", "Quota")},
		{Name: "reconcile.observe", Attrs: with("egressproxy.operation", "observe", "egressproxy.mr.kind", "KubernetesProxy", "egressproxy.resource_exists", "true", "egressproxy.resource_up_to_date", "true")},
	}

	cases := map[string]struct {
		reason   string
		protocol string
		serve    func(*testing.T, *receiver) string
	}{
		"HTTP": {reason: "With only an endpoint set, spans go by OTLP/HTTP protobuf.", protocol: "", serve: serveHTTP},
		"GRPC": {reason: "OTEL_EXPORTER_OTLP_PROTOCOL=grpc sends them by OTLP/gRPC.", protocol: "grpc", serve: serveGRPC},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clearOTelEnv(t)
			r := &receiver{}
			t.Setenv(envEndpoint, tc.serve(t, r))
			t.Setenv(envProtocol, tc.protocol)

			ctx := context.Background()
			stop, err := setupTracing(ctx, "v0.0.0-test")
			if err != nil {
				t.Fatalf("%s\nsetupTracing(...): %v", tc.reason, err)
			}

			// As main wires it: the global tracer, looked up before any
			// span starts.
			i := backend.NewInstrumentation(backend.WithTracer(otel.Tracer("provider-egressproxy")))
			b := backend.Instrument(i, "kubernetes", backend.Backend[struct{}, struct{}](backend.Fns[struct{}, struct{}]{
				ObserveFn: func(context.Context, backend.Desired[struct{}]) (backend.Observation[struct{}], error) {
					return backend.Observation[struct{}]{}, nil
				},
				CreateFn: func(context.Context, backend.Desired[struct{}]) error {
					return backend.Quota(errors.New("no room for another proxy"))
				},
			}))
			desired := func(mg *kubernetesv1alpha1.KubernetesProxy) backend.Desired[struct{}] {
				return backend.Desired[struct{}]{
					Name:        "egp-team-a-proxy",
					Ownership:   backend.Ownership{Owner: proxy.OwnerOf(mg), ProviderInstance: "test"},
					Credentials: backend.Credentials{Username: "u", Password: password},
				}
			}
			e := proxy.Traced[*kubernetesv1alpha1.KubernetesProxy]("kubernetes", managed.TypedExternalClientFns[*kubernetesv1alpha1.KubernetesProxy]{
				ObserveFn: func(ctx context.Context, mg *kubernetesv1alpha1.KubernetesProxy) (managed.ExternalObservation, error) {
					_, err := b.Observe(ctx, desired(mg))
					return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, err
				},
				CreateFn: func(ctx context.Context, mg *kubernetesv1alpha1.KubernetesProxy) (managed.ExternalCreation, error) {
					return managed.ExternalCreation{}, errors.Wrap(b.Create(ctx, desired(mg)), "cannot create the proxy instance")
				},
			})
			if _, err := e.Observe(ctx, mr); err != nil {
				t.Fatalf("Observe: %v", err)
			}
			if _, err := e.Create(ctx, mr); err == nil {
				t.Fatal("Create: want the backend's error")
			}
			// Shutting down flushes the batch: everything has arrived when
			// it returns.
			if err := stop(ctx); err != nil {
				t.Fatalf("%s\nstop(...): %v", tc.reason, err)
			}

			got, service := r.tree(t)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nexported spans: -want, +got:\n%s", tc.reason, diff)
			}
			if service != serviceName {
				t.Errorf("%s\nservice.name: want %q, got %q", tc.reason, serviceName, service)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			for _, req := range r.reqs {
				if raw, _ := proto.Marshal(req); bytes.Contains(raw, []byte(password)) {
					t.Errorf("%s\na credential was exported in a span", tc.reason)
				}
			}
		})
	}
}

func TestTracingEnabled(t *testing.T) {
	cases := map[string]struct {
		reason string
		env    map[string]string
		want   bool
	}{
		"Unset": {
			reason: "With no endpoint nothing is exported, at no cost.",
			want:   false,
		},
		"Endpoint": {
			reason: "The general endpoint turns tracing on.",
			env:    map[string]string{envEndpoint: "http://127.0.0.1:4318"},
			want:   true,
		},
		"TracesEndpoint": {
			reason: "The traces endpoint alone turns tracing on.",
			env:    map[string]string{envTracesEndpoint: "http://127.0.0.1:4318/v1/traces"},
			want:   true,
		},
		"SDKDisabled": {
			reason: "OTEL_SDK_DISABLED=true wins over an endpoint.",
			env:    map[string]string{envEndpoint: "http://127.0.0.1:4318", envSDKDisabled: "true"},
			want:   false,
		},
		"ExporterNone": {
			reason: "OTEL_TRACES_EXPORTER=none wins over an endpoint.",
			env:    map[string]string{envEndpoint: "http://127.0.0.1:4318", envTracesExporter: "none"},
			want:   false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tracingEnabled(func(k string) string { return tc.env[k] })
			if got != tc.want {
				t.Errorf("%s\ntracingEnabled(...): want %t, got %t", tc.reason, tc.want, got)
			}
		})
	}
}

func TestSetupTracingOff(t *testing.T) {
	clearOTelEnv(t)
	otel.SetTracerProvider(noop.NewTracerProvider())
	stop, err := setupTracing(context.Background(), "v0.0.0-test")
	if err != nil {
		t.Fatalf("setupTracing(...): %v", err)
	}
	if _, ok := otel.GetTracerProvider().(noop.TracerProvider); !ok {
		t.Errorf("with no endpoint the global tracer provider must stay a no-op, got %T", otel.GetTracerProvider())
	}
	if err := stop(context.Background()); err != nil {
		t.Errorf("stop(...): %v", err)
	}
}

func TestSetupTracingBadProtocol(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv(envEndpoint, "http://127.0.0.1:4318")
	t.Setenv(envProtocol, "http/json")
	if _, err := setupTracing(context.Background(), "v0.0.0-test"); err == nil {
		t.Error("setupTracing(...): want an error for a protocol the provider cannot speak")
	}
}
