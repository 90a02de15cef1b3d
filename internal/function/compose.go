/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
	"github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
)

const (
	errFmtUnknownBackend = "unknown backend %q in the function input: it must be one of %s"
	errToUnstructured    = "cannot convert the managed resource parameters"
)

// A composer composes the managed resource of one backend.
type composer struct {
	// resource names the managed resource in the Composition.
	resource resource.Name
	name     string
	gvk      schema.GroupVersionKind
	composer backend.Composer
	// policy is the backend's own policy check.
	policy func(cfg, forProvider any, namespace string) ([]string, error)
}

// backendFor returns the backend the input asks for, from the provider's
// list of backends.
func backendFor(b v1alpha1.Backend) (composer, error) {
	d, ok := registry.Backends.Lookup(string(b))
	if !ok {
		return composer{}, errors.Errorf(errFmtUnknownBackend, b, strings.Join(registry.Backends.Names(), ", "))
	}
	return composer{resource: resource.Name(d.Composer.Resource), name: d.Name, gvk: d.Managed, composer: d.Composer, policy: d.Policy}, nil
}

// compose returns the desired managed resource of the proxy, its
// spec.forProvider as the backend's parameters, and warnings about choices
// the function made for the claim.
func (b composer) compose(in *v1alpha1.Input, p proxy) (*composed.Unstructured, any, []string, error) {
	size, warnings := sizeOf(p.spec.Size)
	params, w, err := b.composer.ForProvider(in.Section(b.name), backend.ComposeRequest{Proxy: p.spec.parameters(), Namespace: p.namespace, Size: size})
	if err != nil {
		return nil, nil, nil, err
	}
	fp, err := runtime.DefaultUnstructuredConverter.ToUnstructured(params)
	if err != nil {
		return nil, nil, nil, errors.Wrap(err, errToUnstructured)
	}
	spec := map[string]any{
		"forProvider": fp,
		// The claim's connection secret is filled from this one, which
		// Crossplane reads as the composed resource's connection details.
		"writeConnectionSecretToRef": map[string]any{"name": connectionSecretName(p)},
	}
	if r := in.ProviderConfigRef; r != nil {
		spec["providerConfigRef"] = map[string]any{"kind": r.Kind, "name": r.Name}
	}
	mr := composed.New()
	mr.SetGroupVersionKind(b.gvk)
	// Crossplane names the managed resource; a LegacyCluster XR does not
	// choose its namespace, so the function does. A namespaced XR's is its
	// own, which Crossplane would enforce anyway.
	mr.SetNamespace(p.namespace)
	if p.rotation != "" {
		// Only when set: an annotation someone put on the resource itself,
		// as the resource's docs say, is not the function's to remove.
		mr.SetAnnotations(map[string]string{commonv1alpha1.AnnotationKeyCredentialsRotation: p.rotation})
	}
	mr.Object["spec"] = spec
	return mr, params, append(warnings, w...), nil
}

// connectionSecretName names the managed resource's connection Secret in the
// claim's or namespaced XR's namespace: the one a namespaced XR names, else
// one named after the XR. An XR's name is unique in the cluster (a
// namespaced XR's in its namespace, which is the Secret's), and unlike the
// managed resource's it is known before the first composition.
func connectionSecretName(p proxy) string {
	if p.connectionSecret != "" {
		return p.connectionSecret
	}
	return p.xrName + "-proxy-connection"
}
