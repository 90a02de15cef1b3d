/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// OwnerOf returns the owner of the instance of mg.
func OwnerOf(mg resource.Managed) backend.Owner {
	return backend.Owner{UID: mg.GetUID(), Namespace: mg.GetNamespace(), Name: mg.GetName()}
}

// InstanceName returns the deterministic backend name of mg's instance. An
// external name set by a person (to adopt an existing instance) wins.
func InstanceName(mg resource.Managed, maxLen int) string {
	if n := meta.GetExternalName(mg); n != "" && n != mg.GetName() {
		return n
	}
	return backend.Name(OwnerOf(mg), maxLen)
}

// NameInitializer sets the deterministic instance name as the external
// name, so EXTERNAL-NAME shows what to look for on the backend. It writes
// nothing: the name is derived from the resource, so it cannot be lost, and
// the next write of the resource's metadata saves it along (the finalizer
// and create-pending annotation before Create, or the finalizer of an
// instance found existing), one write per new resource instead of two.
func NameInitializer(maxLen int) managed.Initializer {
	return managed.InitializerFn(func(_ context.Context, mg resource.Managed) error {
		if meta.GetExternalName(mg) == "" {
			meta.SetExternalName(mg, backend.Name(OwnerOf(mg), maxLen))
		}
		return nil
	})
}

func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t.UTC().Truncate(time.Second)) }
