/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/gate"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const errListCRDs = "cannot list CustomResourceDefinitions for safe-start"

// crdGate returns the gate of safe-start: each backend's controllers start
// once its CRDs are established (package/provider/crossplane.yaml declares
// safe-start). The gate watches CRDs; where the provider may not list them,
// it returns no gate and every backend's controllers start at once, as
// before safe-start, so every managed resource kind must then be active.
func crdGate(ctx context.Context, cfg *rest.Config, log logging.Logger) (controller.Gate, error) {
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, errors.Wrap(err, errListCRDs)
	}
	err = c.List(ctx, &apiextensionsv1.CustomResourceDefinitionList{}, client.Limit(1))
	switch {
	case kerrors.IsForbidden(err):
		log.Info("Safe-start is off: the provider may not list CustomResourceDefinitions, so every backend's controllers start at once and need all managed resource kinds active", "error", err.Error())
		return nil, nil
	case err != nil:
		return nil, errors.Wrap(err, errListCRDs)
	}
	return new(gate.Gate[schema.GroupVersionKind]), nil
}
