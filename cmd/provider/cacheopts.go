/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/customresourcesgate"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// cacheOptions are the options of the manager's cache of the control plane.
func cacheOptions(syncInterval *time.Duration) (cache.Options, error) {
	// The provider reads the Secrets of the control plane that app teams
	// and platform teams make (credentials, ProviderConfig keys) and the
	// connection Secrets it writes; never one labelled as its own: those
	// are the kubernetes backend's, in a target cluster (which may be this
	// one, and then they were a second copy of what the backend's watch
	// cache holds, one per proxy), and its key, which it reads before the
	// cache starts.
	notOurs, err := labels.NewRequirement(backend.KubernetesLabelKeys.ManagedBy, selection.NotIn, []string{backend.ManagedByValue})
	if err != nil {
		return cache.Options{}, err
	}
	return cache.Options{
		SyncPeriod: syncInterval,
		// Nothing reads managed fields, and every cached read deep-copies
		// them: most of the converging garbage, and so of the peak RSS.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			// The CRD gate reads only names and conditions of CRDs.
			&apiextensionsv1.CustomResourceDefinition{}: {Transform: customresourcesgate.TransformStripCRDSchema},
			&corev1.Secret{}: {Label: labels.NewSelector().Add(*notOurs)},
		},
	}, nil
}
