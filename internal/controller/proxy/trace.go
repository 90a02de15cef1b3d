/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"reflect"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// TracerName names the tracer of the reconcile spans.
const TracerName = "github.com/egressproxy/provider-egressproxy/internal/controller/proxy"

// Reconcile span attributes besides those of backend.OwnerAttributes.
const (
	attrKind     = attribute.Key("egressproxy.mr.kind")
	attrExists   = attribute.Key("egressproxy.resource_exists")
	attrUpToDate = attribute.Key("egressproxy.resource_up_to_date")
)

// Traced wraps e so each of its calls by the managed reconciler is one span,
// the parent of the backend calls it makes. The tracer is looked up at each
// call, so it is the global one that main configures (a no-op until then).
func Traced[M resource.ModernManaged](backendName string, e managed.TypedExternalClient[M]) managed.TypedExternalClient[M] {
	return &traced[M]{TypedExternalClient: e, backend: backendName}
}

type traced[M resource.ModernManaged] struct {
	managed.TypedExternalClient[M]
	backend string
}

func (t *traced[M]) start(ctx context.Context, op string, mg M) (context.Context, trace.Span) {
	attrs := append([]attribute.KeyValue{
		backend.AttrBackend.String(t.backend),
		backend.AttrOperation.String(op),
		attrKind.String(kindOf(mg)),
	}, backend.OwnerAttributes(OwnerOf(mg))...)
	return otel.Tracer(TracerName).Start(ctx, "reconcile."+op, trace.WithAttributes(attrs...))
}

// end records how the call went and ends span.
func end(span trace.Span, err error) {
	if err != nil {
		span.SetAttributes(backend.AttrErrorClass.String(string(backend.ClassOf(err))))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (t *traced[M]) Observe(ctx context.Context, mg M) (managed.ExternalObservation, error) {
	ctx, span := t.start(ctx, backend.OpObserve, mg)
	o, err := t.TypedExternalClient.Observe(ctx, mg)
	span.SetAttributes(attrExists.Bool(o.ResourceExists), attrUpToDate.Bool(o.ResourceUpToDate))
	end(span, err)
	return o, err
}

func (t *traced[M]) Create(ctx context.Context, mg M) (managed.ExternalCreation, error) {
	ctx, span := t.start(ctx, backend.OpCreate, mg)
	c, err := t.TypedExternalClient.Create(ctx, mg)
	end(span, err)
	return c, err
}

func (t *traced[M]) Update(ctx context.Context, mg M) (managed.ExternalUpdate, error) {
	ctx, span := t.start(ctx, backend.OpUpdate, mg)
	u, err := t.TypedExternalClient.Update(ctx, mg)
	end(span, err)
	return u, err
}

func (t *traced[M]) Delete(ctx context.Context, mg M) (managed.ExternalDelete, error) {
	ctx, span := t.start(ctx, backend.OpDelete, mg)
	d, err := t.TypedExternalClient.Delete(ctx, mg)
	end(span, err)
	return d, err
}

// kindOf names the kind of mg. Typed objects read from the cache carry no
// TypeMeta, so the Go type is the reliable name.
func kindOf(mg resource.Managed) string {
	if k := mg.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	t := reflect.TypeOf(mg)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}
