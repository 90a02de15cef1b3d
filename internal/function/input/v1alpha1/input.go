/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend/gcp/gcpdesc"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kubernetes/kubernetesdesc"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/kvmdesc"
)

// Input type metadata.
const (
	Group      = "egressproxy.fn.egressproxy.io"
	Version    = "v1alpha1"
	Kind       = "Input"
	APIVersion = Group + "/" + Version
)

// A Backend runs egress proxies: each has its own managed resource kind.
// +kubebuilder:validation:Enum=kubernetes;gcp;kvm
type Backend string

// Input configures function-egressproxy for one Composition: the backend it
// composes and the defaults the platform team chooses for it, which a claim
// cannot override.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:categories=crossplane
// +kubebuilder:validation:XValidation:rule="self.backend != 'gcp' || has(self.gcp)",message="gcp must be set when backend is gcp: it holds the required zone"
// +kubebuilder:validation:XValidation:rule="self.backend != 'kvm' || has(self.kvm)",message="kvm must be set when backend is kvm: it holds the required baseImageVolume"
type Input struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Backend the Composition composes a managed resource for.
	Backend Backend `json:"backend"`

	// ProviderConfigRef the composed managed resource uses. When absent the
	// managed resource's default applies: the ClusterProviderConfig named
	// default.
	// +optional
	ProviderConfigRef *ProviderConfigReference `json:"providerConfigRef,omitempty"`

	// Kubernetes defaults, used when backend is kubernetes.
	// +optional
	Kubernetes *kubernetesdesc.Defaults `json:"kubernetes,omitempty"`

	// GCP defaults, used when backend is gcp.
	// +optional
	GCP *gcpdesc.Defaults `json:"gcp,omitempty"`

	// KVM defaults, used when backend is kvm.
	// +optional
	KVM *kvmdesc.Defaults `json:"kvm,omitempty"`

	// Guardrails restrict what a claim may ask for. A claim that asks for
	// more gets WithinGuardrails=False naming the field and the rule, and
	// nothing new is composed for it: a proxy composed before keeps its
	// last configuration. Absent, a claim may ask for anything its schema
	// allows; its proxy still denies private destinations, which a claim
	// cannot turn off.
	// +optional
	Guardrails *Guardrails `json:"guardrails,omitempty"`
}

// Guardrails are the platform team's limits on a claim: the rules a
// provider config's spec.policy holds, but for namespaceSelector (who may
// use a Composition is the XRD's RBAC), checked by the same code, so a
// claim is refused with the provider's message. Each rule that is absent or
// empty restricts nothing.
type Guardrails struct {
	commonv1alpha1.ProxyRules `json:",inline"`
}

// A ProviderConfigReference names a ProviderConfig in the claim's namespace
// or a ClusterProviderConfig.
type ProviderConfigReference struct {
	// Kind of the provider config.
	// +kubebuilder:validation:Enum=ProviderConfig;ClusterProviderConfig
	Kind string `json:"kind"`

	// Name of the provider config.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// Section returns the section of the input named like a backend (the field
// whose JSON name is the backend's name, of a type the backend's descriptor
// package declares), or nil when the input has none. The function hands it
// to the backend's composer, so it names no backend.
func (in *Input) Section(backend string) any {
	v := reflect.ValueOf(in).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != backend || f.Type.Kind() != reflect.Pointer {
			continue
		}
		if p := v.Field(i); !p.IsNil() {
			return p.Interface()
		}
		return nil
	}
	return nil
}
