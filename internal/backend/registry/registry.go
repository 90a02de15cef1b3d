/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package registry describes backends to everything that must know them by
// name: the provider's controllers, the composition function, the test
// harness and make dev. It is light on purpose: the function binary imports
// it (through the list in package apis) without pulling in a controller
// manager, a cloud SDK or go-libvirt. The controller side of a backend (its
// factory and reconcilers) lives in internal/controller/<kind>proxy.
package registry

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	fninput "github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
)

// Kinds every backend's API group has besides its managed resource kind.
// The names are a convention of this provider, so a description needs only
// the managed resource's GVK.
const (
	KindProviderConfig        = "ProviderConfig"
	KindClusterProviderConfig = "ClusterProviderConfig"
	listSuffix                = "List"
)

// A Backend describes one backend. Each backend exports one (from
// internal/backend/<backend>/desc) and package apis lists them all.
type Backend struct {
	// Name names the backend: the function input's backend, the value of
	// the Composition label egressproxy.io/backend, the backend label of
	// metrics and spans.
	Name string

	// Managed is the managed resource kind of the backend. Its API group
	// also holds the ProviderConfig and ClusterProviderConfig kinds.
	Managed schema.GroupVersionKind

	// MaxNameLength is the longest instance name the backend accepts.
	MaxNameLength int

	// AddToScheme adds the backend's API group to a scheme.
	AddToScheme func(*runtime.Scheme) error

	// Composer composes the managed resource in the composition function.
	Composer Composer
}

// ProviderConfig is the GVK of the backend's namespaced ProviderConfig.
func (b Backend) ProviderConfig() schema.GroupVersionKind {
	return b.Managed.GroupVersion().WithKind(KindProviderConfig)
}

// ClusterProviderConfig is the GVK of the backend's ClusterProviderConfig.
func (b Backend) ClusterProviderConfig() schema.GroupVersionKind {
	return b.Managed.GroupVersion().WithKind(KindClusterProviderConfig)
}

// ListOf returns the GVK of the list kind of gvk.
func ListOf(gvk schema.GroupVersionKind) schema.GroupVersionKind {
	return gvk.GroupVersion().WithKind(gvk.Kind + listSuffix)
}

// A Request is what the function asks a backend to compose.
type Request struct {
	// Proxy is what the claim's proxy allows.
	Proxy commonv1alpha1.ProxyParameters
	// Namespace is the claim's namespace, where the managed resource goes.
	Namespace string
	// Size is small, medium or large.
	Size string
}

// A Composer is the composition function's side of a backend.
type Composer struct {
	// Resource names the managed resource in the Composition. Each backend
	// has its own, so a claim moved to another backend's Composition gets
	// its old managed resource deleted and a new one created, rather than
	// one kind applied over another.
	Resource string

	// HasInput reports whether the function input has this backend's
	// section, to warn about a section another backend's Composition
	// carries.
	HasInput func(in *fninput.Input) bool

	// ForProvider returns the managed resource's spec.forProvider, and
	// warnings about choices made for the claim.
	ForProvider func(in *fninput.Input, r Request) (any, []string, error)
}

// A List of backends, as package apis registers them.
type List []Backend

// Lookup returns the backend named name.
func (l List) Lookup(name string) (Backend, bool) {
	for _, b := range l {
		if b.Name == name {
			return b, true
		}
	}
	return Backend{}, false
}

// Names returns the names of the backends, in order.
func (l List) Names() []string {
	out := make([]string, 0, len(l))
	for _, b := range l {
		out = append(out, b.Name)
	}
	return out
}
