/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const errWatchMRs = "cannot watch the managed resources"

// watchMRs returns a reader of the managed resources of gvk that a watch
// keeps current, and a function that stops it. The bench counts their
// conditions every second: a list from the API server each time would
// serialize every MR every second, load that the provider's run has and
// the baseline's does not. A watch costs one event per MR write.
func watchMRs(ctx context.Context, cfg *rest.Config, c client.Client, gvk schema.GroupVersionKind) (client.Reader, func(), error) {
	mrs, err := cache.New(cfg, cache.Options{
		Scheme:            c.Scheme(),
		Mapper:            c.RESTMapper(),
		DefaultNamespaces: map[string]cache.Config{mrNamespace: {}},
	})
	if err != nil {
		return nil, nil, errors.Wrap(err, errWatchMRs)
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() { _ = mrs.Start(ctx) }()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if _, err := mrs.GetInformer(ctx, u); err != nil {
		cancel()
		return nil, nil, errors.Wrap(err, errWatchMRs)
	}
	if !mrs.WaitForCacheSync(ctx) {
		cancel()
		return nil, nil, errors.New(errWatchMRs)
	}
	return mrs, cancel, nil
}

// countConditions counts the MRs of gvk that are Synced, and Ready.
func countConditions(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind) (synced, ready int, err error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	// Read only: no copy of every MR every second.
	if err := c.List(ctx, l, client.InNamespace(mrNamespace), client.UnsafeDisableDeepCopy); err != nil {
		return 0, 0, err
	}
	for i := range l.Items {
		synced += btoi(conditionTrue(&l.Items[i], "Synced"))
		ready += btoi(conditionTrue(&l.Items[i], "Ready"))
	}
	return synced, ready, nil
}
