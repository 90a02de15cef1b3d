/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package backend

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

// Kinds every backend's API group has besides its managed resource kind.
// The names are a convention of this provider, so a description needs only
// the managed resource's GVK.
const (
	KindProviderConfig        = "ProviderConfig"
	KindClusterProviderConfig = "ClusterProviderConfig"
	listSuffix                = "List"
)

// A Description describes a backend to everything that must know it by
// name: the provider's controllers, the composition function, the test
// harness and make dev. Each backend exports one from its descriptor
// package (internal/backend/<name>/<name>desc), which is light on purpose:
// the function binary links it without a controller manager, a cloud SDK or
// go-libvirt. Package registry lists them all.
type Description struct {
	// Name names the backend: the function input's backend and the name of
	// its section, the value of the Composition label
	// egressproxy.io/backend, the backend label of metrics and spans.
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

	// Policy returns the rules of the backend's own policy (spec.policy.<name>
	// of cfg, a ProviderConfig or ClusterProviderConfig of the backend, with
	// the config's other allow lists) that forProvider, the backend's
	// parameters as a value (the provider's connector) or a pointer (the
	// composition function), breaks; namespace is the managed resource's.
	// Each message names the field and the rule. A config or parameters of
	// another backend are an error, never a policy that allows all.
	Policy func(cfg, forProvider any, namespace string) ([]string, error)
}

// ProviderConfig is the GVK of the backend's namespaced ProviderConfig.
func (b Description) ProviderConfig() schema.GroupVersionKind {
	return b.Managed.GroupVersion().WithKind(KindProviderConfig)
}

// ClusterProviderConfig is the GVK of the backend's ClusterProviderConfig.
func (b Description) ClusterProviderConfig() schema.GroupVersionKind {
	return b.Managed.GroupVersion().WithKind(KindClusterProviderConfig)
}

// ListOf returns the GVK of the list kind of gvk.
func ListOf(gvk schema.GroupVersionKind) schema.GroupVersionKind {
	return gvk.GroupVersion().WithKind(gvk.Kind + listSuffix)
}

// Sizes an app team can ask for. The function maps each onto backend
// values: replicas on kubernetes, a machine type on gcp, vCPUs and memory on
// kvm.
const (
	SizeSmall  = "small"
	SizeMedium = "medium"
	SizeLarge  = "large"
)

// A ComposeRequest is what the function asks a backend to compose.
type ComposeRequest struct {
	// Proxy is what the claim's proxy allows.
	Proxy commonv1alpha1.ProxyParameters
	// Namespace is the claim's namespace, where the managed resource goes.
	Namespace string
	// Size is SizeSmall, SizeMedium or SizeLarge.
	Size string
}

// A Composer is the composition function's side of a backend.
type Composer struct {
	// Resource names the managed resource in the Composition. Each backend
	// has its own, so a claim moved to another backend's Composition gets
	// its old managed resource deleted and a new one created, rather than
	// one kind applied over another.
	Resource string

	// ForProvider returns the managed resource's spec.forProvider, and
	// warnings about choices made for the claim. section is the backend's
	// section of the function input (the field named like the backend, of
	// a type its descriptor package declares), nil when the input has
	// none.
	ForProvider func(section any, r ComposeRequest) (any, []string, error)
}
