/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"os"
	"os/exec"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
)

// ClaimGVK is the kind app teams create (package/configuration/xrd.yaml).
func ClaimGVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "egressproxy.io", Version: "v1alpha1", Kind: "EgressProxyClaim"}
}

// CompositeGVK is the composite resource kind a claim gets.
func CompositeGVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "egressproxy.io", Version: "v1alpha1", Kind: "XEgressProxy"}
}

// ManagedGVK returns the managed resource kind of a backend, from its
// description in registry.Backends; the zero GVK for an unknown backend.
func ManagedGVK(b Backend) schema.GroupVersionKind {
	d, _ := registry.Backends.Lookup(string(b))
	return d.Managed
}

const errFmtTrace = "crossplane beta trace failed: %s"

// Object returns an empty object of a kind, to Get into.
func Object(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// Get reads an object of a kind.
func (c *Cluster) Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	u := Object(gvk)
	return u, c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)
}

// Trace runs crossplane beta trace on a claim, with extra args such as
// "-o", "json".
func (c *Cluster) Trace(ctx context.Context, namespace, name string, args ...string) (string, error) {
	a := append([]string{"beta", "trace", "egressproxyclaims.egressproxy.io", name, "-n", namespace}, args...)
	cmd := exec.CommandContext(ctx, c.Tools.Crossplane, a...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), errors.Wrapf(err, errFmtTrace, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
