/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

const errSetExternalName = "cannot record the instance name as external name"

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

// NameInitializer records the deterministic instance name as the external
// name before anything is created, so EXTERNAL-NAME shows what to look for
// on the backend and a crash during Create cannot lose it.
func NameInitializer(c client.Client, maxLen int) managed.Initializer {
	return managed.InitializerFn(func(ctx context.Context, mg resource.Managed) error {
		if meta.GetExternalName(mg) != "" {
			return nil
		}
		meta.SetExternalName(mg, backend.Name(OwnerOf(mg), maxLen))
		return errors.Wrap(c.Update(ctx, mg), errSetExternalName)
	})
}

func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t.UTC().Truncate(time.Second)) }
