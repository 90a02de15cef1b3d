/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"context"
	"fmt"
	"testing"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
)

// nsXRJSON is a namespaced XR (Crossplane v2) in namespace team-a; extraMeta
// and extraSpec add forged or optional fields.
const nsXRJSON = `{
	"apiVersion": "namespaced.egressproxy.io/v1alpha1", "kind": "EgressProxy",
	"metadata": {"name": "web", "namespace": "team-a" %s},
	"spec": {%s "crossplane": {"compositionSelector": {"matchLabels": {"egressproxy.io/backend": "kubernetes"}}},
	         "port": 3128, "allowedClientCIDRs": ["10.0.0.0/8"], "allowedDestinations": [".example.com"],
	         "allowedConnectPorts": [443], "allowedHTTPPorts": [80], "credentialsSecretRef": {"name": "web-creds"}, "size": "small"}}`

func nsXR(extraMeta, extraSpec string) *fnv1.Resource {
	return &fnv1.Resource{Resource: resource.MustStructJSON(fmt.Sprintf(nsXRJSON, extraMeta, extraSpec))}
}

// nsComposedRsp is the response for a namespaced XR whose KubernetesProxy
// is composed in namespace ns with connection Secret secret, before anything
// is observed. It asks only for the provider config: a namespaced XR has no
// claim to ask for.
func nsComposedRsp(ns, secret string, results ...*fnv1.Result) *fnv1.RunFunctionResponse {
	return nsObservedRsp(ns, secret, `{"backend": "kubernetes"}`, map[string][]byte{}, fnv1.Ready_READY_FALSE, results...)
}

// nsObservedRsp is nsComposedRsp once the managed resource is observed: the
// XR gets status and connection details, and the managed resource ready.
func nsObservedRsp(ns, secret, status string, conn map[string][]byte, ready fnv1.Ready, results ...*fnv1.Result) *fnv1.RunFunctionResponse {
	r := rsp(&fnv1.State{
		Composite: desiredXR(status, conn),
		Resources: map[string]*fnv1.Resource{"kubernetes-proxy": {
			Resource: resource.MustStructJSON(fmt.Sprintf(`{"apiVersion": "kubernetes.m.egressproxy.io/v1alpha1", "kind": "KubernetesProxy",
				"metadata": {"namespace": %q},
				"spec": {"forProvider": {%s, "namespace": "egress", "replicas": 1}, "writeConnectionSecretToRef": {"name": %q}}}`, ns, commonForProvider, secret)),
			Ready: ready,
		}},
	}, results...)
	r.Conditions = []*fnv1.Condition{{
		Type: ConditionWithinGuardrails, Status: fnv1.Status_STATUS_CONDITION_TRUE, Reason: ReasonAllowed,
		Target: fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum(),
	}}
	r.Requirements = &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{requiredConfig: configRequirement("kubernetes", "default")}}
	return r
}

func TestRunFunctionNamespaced(t *testing.T) {
	in := resource.MustStructJSON(`{"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1", "kind": "Input", "backend": "kubernetes",
		"kubernetes": {"namespace": "egress"}}`)

	type args struct {
		xr       *fnv1.Resource
		observed map[string]*fnv1.Resource
		required map[string]*fnv1.Resources
	}
	conn := map[string][]byte{"endpoint": []byte("10.96.0.10:3128"), "url": []byte("http://egress:s3cret@10.96.0.10:3128")}
	cases := map[string]struct {
		reason string
		args   args
		want   *fnv1.RunFunctionResponse
	}{
		"ComposedInOwnNamespace": {
			reason: "A namespaced XR needs no claim: the proxy is composed in the XR's own namespace, and nothing is required.",
			args:   args{xr: nsXR("", "")},
			want:   nsComposedRsp("team-a", "web-proxy-connection"),
		},
		"NamedConnectionSecret": {
			reason: "The managed resource writes the connection Secret the namespaced XR names, in the XR's namespace: Crossplane publishes none for a namespaced XR.",
			args:   args{xr: nsXR("", `"writeConnectionSecretToRef": {"name": "web-proxy"},`)},
			want:   nsComposedRsp("team-a", "web-proxy"),
		},
		"ConnectionSecretNamespaceIgnored": {
			reason: "A namespace written next to the Secret's name does not move the Secret or the proxy out of the XR's namespace.",
			args:   args{xr: nsXR("", `"writeConnectionSecretToRef": {"name": "web-proxy", "namespace": "team-b"},`)},
			want:   nsComposedRsp("team-a", "web-proxy"),
		},
		"ForgedClaimLabelAndRef": {
			reason: "A claim namespace label and a claimRef written on a namespaced XR name another team's namespace: they are ignored, and nothing is asked for.",
			args: args{xr: nsXR(`, "labels": {"crossplane.io/claim-name": "web", "crossplane.io/claim-namespace": "team-b"}`,
				claimRefJSON("EgressProxyClaim", "team-b", "web"))},
			want: nsComposedRsp("team-a", "web-proxy-connection"),
		},
		"ForgedRequiredClaim": {
			reason: "Even a claim in another namespace, bound to an XR of this name, does not move a namespaced XR's proxy there.",
			args:   args{xr: nsXR("", claimRefJSON("EgressProxyClaim", "team-b", "web")), required: claimOfXR("team-b", "web", "web")},
			want:   nsComposedRsp("team-a", "web-proxy-connection"),
		},
		"ObservedReady": {
			reason: "A ready managed resource in the XR's namespace makes the namespaced XR ready, with the proxy's status.",
			args: args{
				xr: nsXR("", `"writeConnectionSecretToRef": {"name": "web-proxy"},`),
				observed: map[string]*fnv1.Resource{"kubernetes-proxy": {
					Resource:          resource.MustStructJSON(fmt.Sprintf(observedMRJSON, readyTrue)),
					ConnectionDetails: conn,
				}},
			},
			want: nsObservedRsp("team-a", "web-proxy",
				`{"backend": "kubernetes", "endpoint": "10.96.0.10:3128", "egressIP": "203.0.113.7", "instanceID": "egress/web-x7k2p"}`,
				conn, fnv1.Ready_READY_TRUE),
		},
		"ClusterXRConnectionSecretIgnored": {
			reason: "A cluster-scoped XR's spec.writeConnectionSecretToRef is Crossplane's (in crossplane-system): it never names the managed resource's Secret.",
			args: args{
				xr: xrClaimed("web-x7k2p", "team-a",
					claimRefJSON("EgressProxyClaim", "team-a", "web")+`"writeConnectionSecretToRef": {"name": "0b1c", "namespace": "crossplane-system"},`),
				required: claimOfXR("team-a", "web", "web-x7k2p"),
			},
			want: func() *fnv1.RunFunctionResponse {
				r := nsComposedRsp("team-a", "web-x7k2p-proxy-connection")
				r.Requirements = requirementsFor("team-a", "web")
				r.Requirements.Resources[requiredConfig] = configRequirement("kubernetes", "default")
				return r
			}(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := NewFunction(logging.NewNopLogger())
			got, err := f.RunFunction(context.Background(), &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				Input:             in,
				Observed:          &fnv1.State{Composite: tc.args.xr, Resources: tc.args.observed},
				RequiredResources: tc.args.required,
			})
			if err != nil {
				t.Fatalf("%s\nf.RunFunction(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("%s\nf.RunFunction(...): -want rsp, +got rsp:\n%s", tc.reason, diff)
			}
			// Whatever the case, nothing leaves the XR's namespace.
			xrNS := tc.args.xr.GetResource().GetFields()["metadata"].GetStructValue().GetFields()["namespace"].GetStringValue()
			for n, r := range got.GetDesired().GetResources() {
				ns := r.GetResource().GetFields()["metadata"].GetStructValue().GetFields()["namespace"].GetStringValue()
				if xrNS != "" && ns != xrNS {
					t.Errorf("%s\n%s is composed in namespace %q, not the XR's %q", tc.reason, n, ns, xrNS)
				}
			}
		})
	}
}
