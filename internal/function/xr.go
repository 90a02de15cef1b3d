/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/function-sdk-go/resource/composite"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

const (
	errGetXRSpec        = "cannot read spec of the composite resource"
	errFmtNoClientCIDRs = "%s %s has no spec.allowedClientCIDRs: at least one client network is required"
)

// A proxy is what a claim asks for, read from its XR.
type proxy struct {
	// xrName is the name of the XR; it is unique in the cluster (a
	// namespaced XR's in its namespace) and names what the function
	// composes that Crossplane does not name itself.
	xrName string

	// namespace of the claim, or of the namespaced XR itself, where the
	// managed resource goes. A LegacyCluster XR does not put what it
	// composes in any namespace, but the managed resources are namespaced.
	// It comes from the claim proven to be the XR's (see claimNamespace)
	// or from the namespaced XR's metadata (see namespaceOf), never from
	// the XR's crossplane.io/claim-namespace label: anyone who may create
	// an XR may set that label, and the namespace decides which
	// namespace's Secrets and ProviderConfigs the managed resource uses
	// and where its connection Secret goes.
	namespace string

	// connectionSecret names the managed resource's connection Secret in
	// namespace; empty for the default name (see connectionSecretName).
	connectionSecret string

	// rotation is the XR's egressproxy.io/credentials-rotation annotation,
	// which Crossplane copies from the claim: the composed resource carries
	// it, so that an app team rotates a generated password on its claim
	// without looking for the resource composed for it.
	rotation string

	spec proxySpec
}

// A namespacedSpec is what a namespaced XR has beside the proxySpec: it
// names its connection Secret itself, as a claim does. A cluster-scoped XR's
// spec.writeConnectionSecretToRef is Crossplane's, in its own namespace, and
// is never read.
type namespacedSpec struct {
	WriteConnectionSecretToRef *struct {
		Name string `json:"name"`
	} `json:"writeConnectionSecretToRef,omitempty"`
}

// proxySpec mirrors the XR's spec in the XRDs (package/configuration/xrd.yaml
// and package/configuration-namespaced/xrd.yaml).
type proxySpec struct {
	Port                 *int32                               `json:"port,omitempty"`
	AllowedClientCIDRs   []string                             `json:"allowedClientCIDRs,omitempty"`
	AllowedDestinations  []string                             `json:"allowedDestinations,omitempty"`
	AllowedConnectPorts  []int32                              `json:"allowedConnectPorts,omitempty"`
	AllowedHTTPPorts     []int32                              `json:"allowedHTTPPorts,omitempty"`
	CredentialsSecretRef *commonv1alpha1.LocalSecretReference `json:"credentialsSecretRef,omitempty"`
	Size                 string                               `json:"size,omitempty"`
}

// proxyFrom reads what the claim or namespaced XR asks for from the XR, and
// rejects an XR the function cannot compose a proxy for.
func proxyFrom(xr *composite.Unstructured, namespace string) (proxy, error) {
	p := proxy{xrName: xr.GetName(), namespace: namespace, rotation: xr.GetAnnotations()[commonv1alpha1.AnnotationKeyCredentialsRotation]}
	if err := xr.GetValueInto("spec", &p.spec); err != nil {
		return p, errors.Wrap(err, errGetXRSpec)
	}
	if len(p.spec.AllowedClientCIDRs) == 0 {
		return p, errors.Errorf(errFmtNoClientCIDRs, xr.GetKind(), xr.GetName())
	}
	if xr.GetNamespace() == "" {
		return p, nil
	}
	// Crossplane publishes no connection details of a namespaced XR, so the
	// managed resource, in the XR's namespace, writes the Secret the XR
	// asks for. Only a name: its namespace is the managed resource's.
	ns := namespacedSpec{}
	if err := xr.GetValueInto("spec", &ns); err != nil {
		return p, errors.Wrap(err, errGetXRSpec)
	}
	if r := ns.WriteConnectionSecretToRef; r != nil {
		p.connectionSecret = r.Name
	}
	return p, nil
}

// parameters are the backend-independent managed resource parameters.
func (s proxySpec) parameters() commonv1alpha1.ProxyParameters {
	p := commonv1alpha1.ProxyParameters{
		AllowedClientCIDRs:   s.AllowedClientCIDRs,
		AllowedDestinations:  s.AllowedDestinations,
		AllowedConnectPorts:  s.AllowedConnectPorts,
		AllowedHTTPPorts:     s.AllowedHTTPPorts,
		CredentialsSecretRef: s.CredentialsSecretRef,
	}
	// Zero is omitted, so the managed resource's default port applies.
	if s.Port != nil {
		p.Port = *s.Port
	}
	return p
}
