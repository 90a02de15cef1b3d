/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kubeenv "github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// spans returns every span r received so far.
func (r *receiver) spans() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, req := range r.reqs {
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				out = append(out, ss.GetSpans()...)
			}
		}
	}
	return out
}

func attr(s *tracepb.Span, key string) string {
	for _, a := range s.GetAttributes() {
		if a.GetKey() == key {
			return value(a.GetValue())
		}
	}
	return ""
}

// reconciledTree tells whether spans hold a reconcile.<op> span of the
// managed resource name with a backend.<op> child in the same trace.
func reconciledTree(spans []*tracepb.Span, op, name string) bool {
	for _, p := range spans {
		if p.GetName() != "reconcile."+op || attr(p, "egressproxy.mr.name") != name || len(p.GetParentSpanId()) != 0 {
			continue
		}
		for _, c := range spans {
			if c.GetName() == "backend."+op && bytes.Equal(c.GetParentSpanId(), p.GetSpanId()) && bytes.Equal(c.GetTraceId(), p.GetTraceId()) {
				return true
			}
		}
	}
	return false
}

// TestProviderExportsSpanTreeAndStateMetrics runs the real provider command
// against a real apiserver, with the standard OTLP variable pointing at an
// in-process receiver: a KubernetesProxy on the same cluster (a
// ClusterProviderConfig with InjectedIdentity) is reconciled, its reconcile
// spans arrive with their backend calls as children, and the state
// metrics count it.
func TestProviderExportsSpanTreeAndStateMetrics(t *testing.T) {
	env := kubeenv.Start(t)
	ctx := t.Context()
	const ns = "team-a"
	env.CreateNamespace(t, ns)
	objs := []map[string]any{
		{
			"apiVersion": "kubernetes.m.egressproxy.io/v1alpha1", "kind": "ClusterProviderConfig",
			"metadata": map[string]any{"name": "injected"},
			"spec":     map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}},
		},
		{
			"apiVersion": "kubernetes.m.egressproxy.io/v1alpha1", "kind": "KubernetesProxy",
			"metadata": map[string]any{"name": "traced", "namespace": ns},
			"spec": map[string]any{
				"providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": "injected"},
				"forProvider": map[string]any{
					"namespace": ns, "allowedClientCIDRs": []any{"10.0.0.0/8"},
					"allowedDestinations": []any{"api.example.com"},
				},
			},
		},
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, &unstructured.Unstructured{Object: o}); err != nil {
			t.Fatal(err)
		}
	}

	r := &receiver{}
	metrics, health := freePort(t), freePort(t)
	p := startProvider(t, env.Kubeconfig, []string{envEndpoint + "=" + serveHTTP(t, r), "OTEL_BSP_SCHEDULE_DELAY=100"},
		"--metrics-bind-address="+metrics, "--health-probe-bind-address="+health,
		"--gc-interval=0", "--poll-state-metric=200ms")

	state := `crossplane_managed_resource_exists{gvk="kubernetes.m.egressproxy.io/v1alpha1, Kind=KubernetesProxy"} 1`
	p.await(t, 2*time.Minute, 300*time.Millisecond, func() (bool, string) {
		s := r.spans()
		observed, created := reconciledTree(s, "observe", "traced"), reconciledTree(s, "create", "traced")
		counted := strings.Contains(scrape(metrics), state)
		return observed && created && counted, fmt.Sprintf("want reconcile.observe and reconcile.create spans of traced with backend children (got %t, %t) and %s (got %t); %d spans",
			observed, created, state, counted, len(s))
	})
}
