/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/function-sdk-go/resource/composite"
	"k8s.io/apimachinery/pkg/util/validation"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

// LabelClaimNamespace is set by Crossplane on an XR created for a claim.
// A LegacyCluster XR does not put what it composes in any namespace, but the
// managed resources are namespaced: they go into the claim's namespace.
const LabelClaimNamespace = "crossplane.io/claim-namespace"

const (
	errGetXRSpec          = "cannot read spec of the composite resource"
	errFmtNoClaimNS       = "%s %s has no %s label: it must be created through an EgressProxy claim, whose namespace the proxy is composed in"
	errFmtNoClientCIDRs   = "%s %s has no spec.allowedClientCIDRs: at least one client network is required"
	errFmtInvalidClaimNSL = "%s %s has an invalid %s label %q: it must be a namespace name"
)

// A proxy is what a claim asks for, read from its XR.
type proxy struct {
	// xrName is the name of the XR; it is unique in the cluster and names
	// what the function composes that Crossplane does not name itself.
	xrName string

	// namespace of the claim, where the managed resource goes.
	namespace string

	spec proxySpec
}

// proxySpec mirrors the XR's spec in the XRD (package/configuration/xrd.yaml).
type proxySpec struct {
	Port                 *int32                               `json:"port,omitempty"`
	AllowedClientCIDRs   []string                             `json:"allowedClientCIDRs,omitempty"`
	AllowedDestinations  []string                             `json:"allowedDestinations,omitempty"`
	AllowedConnectPorts  []int32                              `json:"allowedConnectPorts,omitempty"`
	CredentialsSecretRef *commonv1alpha1.LocalSecretReference `json:"credentialsSecretRef,omitempty"`
	Size                 string                               `json:"size,omitempty"`
}

// proxyFrom reads what the claim asks for from its XR, and rejects an XR the
// function cannot compose a proxy for.
func proxyFrom(xr *composite.Unstructured) (proxy, error) {
	p := proxy{xrName: xr.GetName(), namespace: xr.GetLabels()[LabelClaimNamespace]}
	if p.namespace == "" {
		return p, errors.Errorf(errFmtNoClaimNS, xr.GetKind(), xr.GetName(), LabelClaimNamespace)
	}
	if len(validation.IsDNS1123Label(p.namespace)) > 0 {
		return p, errors.Errorf(errFmtInvalidClaimNSL, xr.GetKind(), xr.GetName(), LabelClaimNamespace, p.namespace)
	}
	if err := xr.GetValueInto("spec", &p.spec); err != nil {
		return p, errors.Wrap(err, errGetXRSpec)
	}
	if len(p.spec.AllowedClientCIDRs) == 0 {
		return p, errors.Errorf(errFmtNoClientCIDRs, xr.GetKind(), xr.GetName())
	}
	return p, nil
}

// parameters are the backend-independent managed resource parameters.
func (s proxySpec) parameters() commonv1alpha1.ProxyParameters {
	p := commonv1alpha1.ProxyParameters{
		AllowedClientCIDRs:   s.AllowedClientCIDRs,
		AllowedDestinations:  s.AllowedDestinations,
		AllowedConnectPorts:  s.AllowedConnectPorts,
		CredentialsSecretRef: s.CredentialsSecretRef,
	}
	// Zero is omitted, so the managed resource's default port applies.
	if s.Port != nil {
		p.Port = *s.Port
	}
	return p
}
