/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package backend

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Operation names, as they appear in metrics and spans.
const (
	OpObserve = "observe"
	OpCreate  = "create"
	OpUpdate  = "update"
	OpDelete  = "delete"
	OpList    = "list"
	OpHealth  = "health"
)

// Span attribute keys. They name the backend, the call and the managed
// resource, never a credential: spans leave the cluster.
const (
	AttrBackend     = attribute.Key("egressproxy.backend")
	AttrOperation   = attribute.Key("egressproxy.operation")
	AttrInstance    = attribute.Key("egressproxy.instance")
	AttrErrorClass  = attribute.Key("egressproxy.error_class")
	AttrMRNamespace = attribute.Key("egressproxy.mr.namespace")
	AttrMRName      = attribute.Key("egressproxy.mr.name")
	AttrMRUID       = attribute.Key("egressproxy.mr.uid")
)

// OwnerAttributes returns the span attributes that identify the managed
// resource o; none for calls made for no resource (List, health checks).
func OwnerAttributes(o Owner) []attribute.KeyValue {
	if o == (Owner{}) {
		return nil
	}
	return []attribute.KeyValue{
		AttrMRNamespace.String(o.Namespace),
		AttrMRName.String(o.Name),
		AttrMRUID.String(string(o.UID)),
	}
}

// Metrics counts and times every backend call. Create it once per process
// and register it; every instrumented backend shares it.
type Metrics struct {
	calls   *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

// NewMetrics returns the backend call metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "egressproxy_backend_calls_total",
			Help: "Backend calls by backend, operation and error class (empty class: success).",
		}, []string{"backend", "operation", "class"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "egressproxy_backend_call_duration_seconds",
			Help:    "Latency of backend calls by backend and operation.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"backend", "operation"}),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.calls.Describe(ch)
	m.latency.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.calls.Collect(ch)
	m.latency.Collect(ch)
}

// Instrumentation is where every backend call is counted, timed and traced,
// so that no backend repeats it.
type Instrumentation struct {
	metrics *Metrics
	tracer  trace.Tracer
}

// InstrumentationOption configures Instrumentation.
type InstrumentationOption func(*Instrumentation)

// WithMetrics counts and times calls in m.
func WithMetrics(m *Metrics) InstrumentationOption {
	return func(i *Instrumentation) { i.metrics = m }
}

// WithTracer opens a span per call with t.
func WithTracer(t trace.Tracer) InstrumentationOption {
	return func(i *Instrumentation) { i.tracer = t }
}

// NewInstrumentation returns an Instrumentation; without options it neither
// counts nor traces.
func NewInstrumentation(o ...InstrumentationOption) *Instrumentation {
	i := &Instrumentation{tracer: noop.NewTracerProvider().Tracer("")}
	for _, fn := range o {
		fn(i)
	}
	return i
}

// call runs fn as one instrumented backend call for the instance name of
// owner. Its span is a child of the one in ctx: the reconcile's.
func (i *Instrumentation) call(ctx context.Context, backend, op, name string, owner Owner, fn func(ctx context.Context) error) error {
	attrs := append([]attribute.KeyValue{AttrBackend.String(backend), AttrOperation.String(op)}, OwnerAttributes(owner)...)
	if name != "" {
		attrs = append(attrs, AttrInstance.String(name))
	}
	ctx, span := i.tracer.Start(ctx, "backend."+op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	defer span.End()
	start := time.Now()
	err := fn(ctx)
	class := ClassOf(err)
	if i.metrics != nil {
		i.metrics.calls.WithLabelValues(backend, op, string(class)).Inc()
		i.metrics.latency.WithLabelValues(backend, op).Observe(time.Since(start).Seconds())
	}
	if err != nil {
		span.SetAttributes(AttrErrorClass.String(string(class)))
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// Instrument wraps b so every call is counted, timed and traced under the
// backend name.
func Instrument[P, O any](i *Instrumentation, backend string, b Backend[P, O]) Backend[P, O] {
	return &instrumented[P, O]{i: i, name: backend, b: b}
}

type instrumented[P, O any] struct {
	i    *Instrumentation
	name string
	b    Backend[P, O]
}

func (x *instrumented[P, O]) Observe(ctx context.Context, d Desired[P]) (Observation[O], error) {
	var o Observation[O]
	err := x.i.call(ctx, x.name, OpObserve, d.Name, d.Ownership.Owner, func(ctx context.Context) error {
		var err error
		o, err = x.b.Observe(ctx, d)
		return err
	})
	return o, err
}

func (x *instrumented[P, O]) Create(ctx context.Context, d Desired[P]) error {
	return x.i.call(ctx, x.name, OpCreate, d.Name, d.Ownership.Owner, func(ctx context.Context) error { return x.b.Create(ctx, d) })
}

func (x *instrumented[P, O]) Update(ctx context.Context, d Desired[P]) error {
	return x.i.call(ctx, x.name, OpUpdate, d.Name, d.Ownership.Owner, func(ctx context.Context) error { return x.b.Update(ctx, d) })
}

func (x *instrumented[P, O]) Delete(ctx context.Context, d Desired[P]) error {
	return x.i.call(ctx, x.name, OpDelete, d.Name, d.Ownership.Owner, func(ctx context.Context) error { return x.b.Delete(ctx, d) })
}

func (x *instrumented[P, O]) List(ctx context.Context) ([]Instance, error) {
	var l []Instance
	err := x.i.call(ctx, x.name, OpList, "", Owner{}, func(ctx context.Context) error {
		var err error
		l, err = x.b.List(ctx)
		return err
	})
	return l, err
}

// CheckHealth instruments a health check of one backend.
func (i *Instrumentation) CheckHealth(ctx context.Context, backend string, h HealthChecker) error {
	return i.call(ctx, backend, OpHealth, "", Owner{}, h.CheckHealth)
}
