/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"fmt"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"k8s.io/utils/ptr"
)

// xrClaimedJSON is an XR with a claim namespace label and a claimRef, either
// of which may be forged.
const xrClaimedJSON = `{
	"apiVersion": "egressproxy.io/v1alpha1", "kind": "XEgressProxy",
	"metadata": {"name": "%s", "labels": {"crossplane.io/claim-name": "web", "crossplane.io/claim-namespace": "%s"}},
	"spec": {%s "port": 3128, "allowedClientCIDRs": ["10.0.0.0/8"], "allowedDestinations": [".example.com"],
	         "allowedConnectPorts": [443], "allowedHTTPPorts": [80], "credentialsSecretRef": {"name": "web-creds"}, "size": "small"}}`

func xrClaimed(name, labelNS, claimRef string) *fnv1.Resource {
	return &fnv1.Resource{Resource: resource.MustStructJSON(fmt.Sprintf(xrClaimedJSON, name, labelNS, claimRef))}
}

func claimRefJSON(kind, ns, name string) string {
	return fmt.Sprintf(`"claimRef": {"apiVersion": "egressproxy.io/v1alpha1", "kind": %q, "name": %q, "namespace": %q},`, kind, name, ns)
}

// claimOfXR returns claim ns/name as Crossplane fetches it, bound to XR xrName.
func claimOfXR(ns, name, xrName string) map[string]*fnv1.Resources {
	return map[string]*fnv1.Resources{requiredClaim: {Items: []*fnv1.Resource{{Resource: resource.MustStructJSON(fmt.Sprintf(
		`{"apiVersion": "egressproxy.io/v1alpha1", "kind": "EgressProxyClaim", "metadata": {"name": %q, "namespace": %q},
		  "spec": {"resourceRef": {"apiVersion": "egressproxy.io/v1alpha1", "kind": "XEgressProxy", "name": %q}}}`, name, ns, xrName))}}}}
}

func requirementsFor(ns, name string) *fnv1.Requirements {
	return &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{requiredClaim: {
		ApiVersion: "egressproxy.io/v1alpha1",
		Kind:       "EgressProxyClaim",
		Match:      &fnv1.ResourceSelector_MatchName{MatchName: name},
		Namespace:  ptr.To(ns),
	}}}
}

func TestRunFunctionClaim(t *testing.T) {
	in := resource.MustStructJSON(kubernetesInput)
	withRequirements := func(r *fnv1.RunFunctionResponse, req *fnv1.Requirements) *fnv1.RunFunctionResponse {
		r.Requirements = req
		return r
	}

	cases := map[string]runCase{
		"RequiresClaim": {
			reason: "Until Crossplane has fetched the claim the function only asks for it, and desires nothing yet.",
			req: &fnv1.RunFunctionRequest{
				Meta:     &fnv1.RequestMeta{Tag: "t"},
				Input:    in,
				Observed: &fnv1.State{Composite: xr("small")},
			},
			want: withRequirements(rsp(nil), claimRequirements()),
		},
		"ForgedLabelIgnored": {
			reason: "The crossplane.io/claim-namespace label is not where the proxy goes: the proven claim's namespace is.",
			req: &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				Input:             in,
				Observed:          &fnv1.State{Composite: xrClaimed("web-x7k2p", "team-b", claimRefJSON("EgressProxyClaim", "team-a", "web"))},
				RequiredResources: claimed(),
			},
			want: composedRsp(&fnv1.State{
				Composite: desiredXR(`{"backend": "kubernetes"}`, map[string][]byte{}),
				Resources: map[string]*fnv1.Resource{"kubernetes-proxy": {
					Resource: resource.MustStructJSON(mrJSON("KubernetesProxy", "kubernetes.m.egressproxy.io", kubernetesFP, "")),
					Ready:    fnv1.Ready_READY_FALSE,
				}},
			}),
		},
		"LabelWithoutClaimRef": {
			reason: "An XR with only a claim namespace label, which anyone who may create an XR can set, is claim-less: nothing is composed.",
			req: &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				Input:             in,
				Observed:          &fnv1.State{Composite: xrClaimed("evil", "team-b", "")},
				RequiredResources: claimOfXR("team-b", "web", "web-x7k2p"),
			},
			want: rsp(nil, fatal("XEgressProxy evil has no spec.claimRef: it must be created through an EgressProxyClaim, whose namespace the proxy is composed in")),
		},
		"ForgedClaimRef": {
			reason: "An XR whose claimRef names another team's claim, which is bound to another XR, is claim-less: nothing is composed in that team's namespace.",
			req: &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				Input:             in,
				Observed:          &fnv1.State{Composite: xrClaimed("evil", "team-b", claimRefJSON("EgressProxyClaim", "team-b", "web"))},
				RequiredResources: claimOfXR("team-b", "web", "web-x7k2p"),
			},
			want: withRequirements(rsp(nil, fatal(
				"XEgressProxy evil references claim team-b/web in spec.claimRef, but that claim's spec.resourceRef does not name this XEgressProxy: nothing is composed for it")),
				requirementsFor("team-b", "web")),
		},
		"ClaimMissing": {
			reason: "An XR whose claimRef names a claim that does not exist is claim-less.",
			req: &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				Input:             in,
				Observed:          &fnv1.State{Composite: xrClaimed("evil", "team-b", claimRefJSON("EgressProxyClaim", "team-b", "ghost"))},
				RequiredResources: map[string]*fnv1.Resources{requiredClaim: {}},
			},
			want: withRequirements(rsp(nil, fatal(
				"XEgressProxy evil references claim team-b/ghost in spec.claimRef, which does not exist: nothing is composed for it")),
				requirementsFor("team-b", "ghost")),
		},
		"ClaimRefToOtherKind": {
			reason: "A claimRef must name an EgressProxyClaim: no other kind proves where the proxy goes.",
			req: &fnv1.RunFunctionRequest{
				Meta:     &fnv1.RequestMeta{Tag: "t"},
				Input:    in,
				Observed: &fnv1.State{Composite: xrClaimed("evil", "team-b", claimRefJSON("Secret", "team-b", "web"))},
			},
			want: rsp(nil, fatal("XEgressProxy evil has a spec.claimRef to Secret team-b/web, not to an EgressProxyClaim of its own API group")),
		},
		"ClaimRefBadNamespace": {
			reason: "A claimRef namespace that is not a namespace name is rejected before anything is asked for.",
			req: &fnv1.RunFunctionRequest{
				Meta:     &fnv1.RequestMeta{Tag: "t"},
				Input:    in,
				Observed: &fnv1.State{Composite: xrClaimed("evil", "team-b", claimRefJSON("EgressProxyClaim", "Team_B", "web"))},
			},
			want: rsp(nil, fatal(`XEgressProxy evil has a spec.claimRef to namespace "Team_B", which is not a namespace name`)),
		},
	}

	runCases(t, cases)
}
