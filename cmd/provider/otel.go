/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"
	"os"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// The standard OpenTelemetry variables this provider reads itself; the
// exporters and the SDK read the others (headers, TLS, timeouts, sampler,
// batching, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES).
const (
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envSDKDisabled    = "OTEL_SDK_DISABLED"
	envTracesExporter = "OTEL_TRACES_EXPORTER"
)

const serviceName = "provider-egressproxy"

const (
	errFmtProtocol = "unsupported OTLP protocol %q: use grpc or http/protobuf"
	errExporter    = "cannot create the OTLP trace exporter"
	errResource    = "cannot describe this process as an OpenTelemetry resource"
)

// tracingEnabled tells whether the environment asks for traces to be
// exported. Off unless an OTLP endpoint is set, so that a provider nobody
// collects traces from does not pay for them.
func tracingEnabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv(envSDKDisabled), "true") || getenv(envTracesExporter) == "none" {
		return false
	}
	return getenv(envEndpoint) != "" || getenv(envTracesEndpoint) != ""
}

// setupTracing makes an SDK tracer provider that exports by OTLP the global
// one, when the environment asks for it. It returns a function that flushes
// and stops the exporter; when tracing is off it does nothing, and every
// tracer stays the global no-op.
func setupTracing(ctx context.Context, version string) (func(context.Context) error, error) {
	off := func(context.Context) error { return nil }
	if !tracingEnabled(os.Getenv) {
		return off, nil
	}
	var exp sdktrace.SpanExporter
	var err error
	// The traces-specific variable wins over the general one, as the
	// OpenTelemetry specification says; http/protobuf is its default.
	p := os.Getenv(envTracesProtocol)
	if p == "" {
		p = os.Getenv(envProtocol)
	}
	switch p {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return off, errors.Errorf(errFmtProtocol, p)
	}
	if err != nil {
		return off, errors.Wrap(err, errExporter)
	}
	// WithFromEnv comes last so OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override the defaults.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(serviceName), semconv.ServiceVersion(version)),
		resource.WithFromEnv(),
	)
	if err != nil {
		return off, errors.Wrap(err, errResource)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	// Client libraries that call out over HTTP (Compute Engine) carry the
	// trace on to their server when it propagates W3C trace context.
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, nil
}
