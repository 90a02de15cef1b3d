/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/utils/ptr"
)

const (
	xrJSON = `{
		"apiVersion": "egressproxy.io/v1alpha1", "kind": "XEgressProxy",
		"metadata": {"name": "web-x7k2p", "labels": {"crossplane.io/claim-name": "web", "crossplane.io/claim-namespace": "team-a"}},
		"spec": {"claimRef": {"apiVersion": "egressproxy.io/v1alpha1", "kind": "EgressProxyClaim", "name": "web", "namespace": "team-a"},
		         "port": 3128, "allowedClientCIDRs": ["10.0.0.0/8"], "allowedDestinations": [".example.com"],
		         "allowedConnectPorts": [443], "allowedHTTPPorts": [80], "credentialsSecretRef": {"name": "web-creds"}, "size": "%s"}}`
	xrNoClaimJSON = `{
		"apiVersion": "egressproxy.io/v1alpha1", "kind": "XEgressProxy",
		"metadata": {"name": "web"},
		"spec": {"allowedClientCIDRs": ["10.0.0.0/8"]}}`
	commonForProvider = `"port": 3128, "allowedClientCIDRs": ["10.0.0.0/8"], "allowedDestinations": [".example.com"],
		"allowedConnectPorts": [443], "allowedHTTPPorts": [80], "credentialsSecretRef": {"name": "web-creds"}`
	connRef = `"writeConnectionSecretToRef": {"name": "web-x7k2p-proxy-connection"}`

	// claimJSON is the claim of the XR above, as Crossplane returns it for
	// the function's requirement.
	claimJSON = `{"apiVersion": "egressproxy.io/v1alpha1", "kind": "EgressProxyClaim",
		"metadata": {"name": "web", "namespace": "team-a"},
		"spec": {"resourceRef": {"apiVersion": "egressproxy.io/v1alpha1", "kind": "XEgressProxy", "name": "web-x7k2p"}}}`
)

// claimed returns the required resources of a request once Crossplane has
// fetched the claim.
func claimed() map[string]*fnv1.Resources {
	return map[string]*fnv1.Resources{requiredClaim: {Items: []*fnv1.Resource{{Resource: resource.MustStructJSON(claimJSON)}}}}
}

// claimRequirements asks for claim team-a/web.
func claimRequirements() *fnv1.Requirements {
	return &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{requiredClaim: {
		ApiVersion: "egressproxy.io/v1alpha1",
		Kind:       "EgressProxyClaim",
		Match:      &fnv1.ResourceSelector_MatchName{MatchName: "web"},
		Namespace:  ptr.To("team-a"),
	}}}
}

// configRequirement asks for the ClusterProviderConfig name of backend,
// which the composed resource will use.
func configRequirement(backend, name string) *fnv1.ResourceSelector {
	return &fnv1.ResourceSelector{
		ApiVersion: backend + ".m.egressproxy.io/v1alpha1",
		Kind:       "ClusterProviderConfig",
		Match:      &fnv1.ResourceSelector_MatchName{MatchName: name},
	}
}

// onConfig makes r ask for the ClusterProviderConfig name of backend rather
// than the kubernetes default one.
func onConfig(r *fnv1.RunFunctionResponse, backend, name string) *fnv1.RunFunctionResponse {
	r.Requirements.Resources[requiredConfig] = configRequirement(backend, name)
	return r
}

// composedRsp is the response for a claim that is composed on the
// kubernetes ClusterProviderConfig default.
func composedRsp(desired *fnv1.State, results ...*fnv1.Result) *fnv1.RunFunctionResponse {
	r := rsp(desired, results...)
	r.Requirements = claimRequirements()
	r.Requirements.Resources[requiredConfig] = configRequirement("kubernetes", "default")
	r.Conditions = []*fnv1.Condition{{
		Type: ConditionWithinGuardrails, Status: fnv1.Status_STATUS_CONDITION_TRUE, Reason: ReasonAllowed,
		Target: fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum(),
	}}
	return r
}

// claimFatal is a fatal result once the function has read the XR's claimRef.
func claimFatal(msg string) *fnv1.RunFunctionResponse {
	r := rsp(nil, fatal(msg))
	r.Requirements = claimRequirements()
	return r
}

func xr(size string) *fnv1.Resource {
	return &fnv1.Resource{Resource: resource.MustStructJSON(fmt.Sprintf(xrJSON, size))}
}

func mrJSON(kind, group, forProvider, extraSpec string) string {
	return fmt.Sprintf(`{"apiVersion": "%s/v1alpha1", "kind": "%s", "metadata": {"namespace": "team-a"},
		"spec": {%s "forProvider": {%s, %s}, %s}}`, group, kind, extraSpec, commonForProvider, forProvider, connRef)
}

func rsp(desired *fnv1.State, results ...*fnv1.Result) *fnv1.RunFunctionResponse {
	return &fnv1.RunFunctionResponse{
		Meta:    &fnv1.ResponseMeta{Tag: "t", Ttl: durationpb.New(response.DefaultTTL)},
		Desired: desired,
		Results: results,
	}
}

func fatal(msg string) *fnv1.Result {
	return &fnv1.Result{Severity: fnv1.Severity_SEVERITY_FATAL, Message: msg, Target: fnv1.Target_TARGET_COMPOSITE.Enum()}
}

func warning(msg string) *fnv1.Result {
	return &fnv1.Result{Severity: fnv1.Severity_SEVERITY_WARNING, Message: msg, Target: fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum()}
}

func desiredXR(status string, conn map[string][]byte) *fnv1.Resource {
	return &fnv1.Resource{Resource: resource.MustStructJSON(`{"status": ` + status + `}`), ConnectionDetails: conn}
}

// runCase is one RunFunction request and the response it must get; the
// RunFunction tests of this package share it and runCases.
type runCase struct {
	reason string
	req    *fnv1.RunFunctionRequest
	want   *fnv1.RunFunctionResponse
}

// runCases runs each case through a new Function, which must return its
// response and no error.
func runCases(t *testing.T, cases map[string]runCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := NewFunction(logging.NewNopLogger()).RunFunction(context.Background(), tc.req)
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("%s\nf.RunFunction(...): -want rsp, +got rsp:\n%s", tc.reason, diff)
			}
			if err != nil {
				t.Errorf("%s\nf.RunFunction(...): unexpected error: %v", tc.reason, err)
			}
		})
	}
}

func TestRunFunction(t *testing.T) {
	cases := map[string]runCase{
		"UnknownBackend": {
			reason: "An input naming no known backend is a fatal result.",
			req: &fnv1.RunFunctionRequest{
				Meta:     &fnv1.RequestMeta{Tag: "t"},
				Input:    resource.MustStructJSON(`{"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1", "kind": "Input", "backend": "podman"}`),
				Observed: &fnv1.State{Composite: xr("small")},
			},
			want: rsp(nil, fatal(`unknown backend "podman" in the function input: it must be one of kubernetes, gcp, kvm`)),
		},
		"NoClaimRef": {
			reason: "An XR not created for a claim has no namespace to compose the proxy in: a fatal result.",
			req: &fnv1.RunFunctionRequest{
				Meta:     &fnv1.RequestMeta{Tag: "t"},
				Input:    resource.MustStructJSON(`{"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1", "kind": "Input", "backend": "kubernetes"}`),
				Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: resource.MustStructJSON(xrNoClaimJSON)}},
			},
			want: rsp(nil, fatal("XEgressProxy web has no spec.claimRef: it must be created through an EgressProxyClaim, whose namespace the proxy is composed in")),
		},
		"GCPNoZone": {
			reason: "A gcp Composition without a zone cannot compose a VM: a fatal result.",
			req: &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				RequiredResources: claimed(),
				Input:             resource.MustStructJSON(`{"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1", "kind": "Input", "backend": "gcp", "gcp": {"zone": ""}}`),
				Observed:          &fnv1.State{Composite: xr("small")},
			},
			want: claimFatal("the function input has no gcp.zone: a Composition for the gcp backend must choose the zone of the proxy VMs"),
		},
		"KVMNoBaseImage": {
			reason: "A kvm Composition without a base image cannot compose a VM: a fatal result.",
			req: &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				RequiredResources: claimed(),
				Input:             resource.MustStructJSON(`{"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1", "kind": "Input", "backend": "kvm"}`),
				Observed:          &fnv1.State{Composite: xr("small")},
			},
			want: claimFatal("the function input has no kvm.baseImageVolume: a Composition for the kvm backend must choose the image the proxy VMs boot"),
		},
		"KubernetesFirstReconcile": {
			reason: "Before anything is observed the function composes a KubernetesProxy in the claim's namespace, not ready, and sets only the backend on the XR.",
			req: &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				RequiredResources: claimed(),
				Input: resource.MustStructJSON(`{"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1", "kind": "Input", "backend": "kubernetes",
					"providerConfigRef": {"kind": "ClusterProviderConfig", "name": "in-cluster"},
					"kubernetes": {"namespace": "egress", "image": "squid:6", "replicas": {"medium": 4}}}`),
				Observed: &fnv1.State{Composite: xr("medium")},
			},
			want: onConfig(composedRsp(&fnv1.State{
				Composite: desiredXR(`{"backend": "kubernetes"}`, map[string][]byte{}),
				Resources: map[string]*fnv1.Resource{"kubernetes-proxy": {
					Resource: resource.MustStructJSON(mrJSON("KubernetesProxy", "kubernetes.m.egressproxy.io",
						`"namespace": "egress", "image": "squid:6", "replicas": 4`,
						`"providerConfigRef": {"kind": "ClusterProviderConfig", "name": "in-cluster"},`)),
					Ready: fnv1.Ready_READY_FALSE,
				}},
			}), "kubernetes", "in-cluster"),
		},
		"KubernetesNoNamespace": {
			reason: "Without a target namespace in the input the proxy runs in one named like the claim's namespace, with a warning.",
			req: &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				RequiredResources: claimed(),
				Input:             resource.MustStructJSON(`{"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1", "kind": "Input", "backend": "kubernetes"}`),
				Observed:          &fnv1.State{Composite: xr("")},
			},
			want: composedRsp(&fnv1.State{
				Composite: desiredXR(`{"backend": "kubernetes"}`, map[string][]byte{}),
				Resources: map[string]*fnv1.Resource{"kubernetes-proxy": {
					Resource: resource.MustStructJSON(mrJSON("KubernetesProxy", "kubernetes.m.egressproxy.io", `"namespace": "team-a", "replicas": 1`, "")),
					Ready:    fnv1.Ready_READY_FALSE,
				}},
			}, warning(`the function input has no kubernetes.namespace: the proxy runs in namespace "team-a" of the target cluster, named like the claim's`)),
		},
		"RotationFromClaim": {
			reason: "The credentials-rotation annotation Crossplane copies from the claim to the XR goes on the composed resource, whose generated password it rotates.",
			req: &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				RequiredResources: claimed(),
				Input:             resource.MustStructJSON(`{"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1", "kind": "Input", "backend": "kubernetes", "kubernetes": {"namespace": "egress"}}`),
				Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: resource.MustStructJSON(strings.Replace(fmt.Sprintf(xrJSON, "small"),
					`"metadata": {`, `"metadata": {"annotations": {"egressproxy.io/credentials-rotation": "2026-12-05", "other": "x"}, `, 1))}},
			},
			want: composedRsp(&fnv1.State{
				Composite: desiredXR(`{"backend": "kubernetes"}`, map[string][]byte{}),
				Resources: map[string]*fnv1.Resource{"kubernetes-proxy": {
					Resource: resource.MustStructJSON(strings.Replace(mrJSON("KubernetesProxy", "kubernetes.m.egressproxy.io", `"namespace": "egress", "replicas": 1`, ""),
						`"metadata": {`, `"metadata": {"annotations": {"egressproxy.io/credentials-rotation": "2026-12-05"}, `, 1)),
					Ready: fnv1.Ready_READY_FALSE,
				}},
			}),
		},
		"GCPLarge": {
			reason: "A large gcp proxy gets the built-in large machine type and the input's zone, image and network; an input section for another backend is ignored with a warning.",
			req: &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				RequiredResources: claimed(),
				Input: resource.MustStructJSON(`{"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1", "kind": "Input", "backend": "gcp",
					"gcp": {"zone": "europe-west1-b", "image": "projects/debian-cloud/global/images/family/debian-12", "network": "egress", "subnetwork": "egress-ew1", "networkTags": ["egress"]},
					"kvm": {"baseImageVolume": "debian-12.qcow2"}}`),
				Observed: &fnv1.State{Composite: xr("large")},
			},
			want: onConfig(composedRsp(&fnv1.State{
				Composite: desiredXR(`{"backend": "gcp"}`, map[string][]byte{}),
				Resources: map[string]*fnv1.Resource{"gcp-proxy": {
					Resource: resource.MustStructJSON(mrJSON("GCPProxy", "gcp.m.egressproxy.io",
						`"zone": "europe-west1-b", "machineType": "e2-standard-2", "image": "projects/debian-cloud/global/images/family/debian-12",
						 "network": "egress", "subnetwork": "egress-ew1", "networkTags": ["egress"]`, "")),
					Ready: fnv1.Ready_READY_FALSE,
				}},
			}, warning("the function input's kvm section is ignored: the backend is gcp")), "gcp", "default"),
		},
		"KVMSmall": {
			reason: "A small kvm proxy gets the input's small size and its pool, image, network and domain type.",
			req: &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				RequiredResources: claimed(),
				Input: resource.MustStructJSON(`{"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1", "kind": "Input", "backend": "kvm",
					"kvm": {"pool": "vms", "baseImageVolume": "debian-12.qcow2", "network": {"bridge": "br0"}, "domainType": "qemu", "diskGiB": 4,
					        "sizes": {"small": {"vcpus": 2, "memoryMiB": 768}}}}`),
				Observed: &fnv1.State{Composite: xr("small")},
			},
			want: onConfig(composedRsp(&fnv1.State{
				Composite: desiredXR(`{"backend": "kvm"}`, map[string][]byte{}),
				Resources: map[string]*fnv1.Resource{"kvm-proxy": {
					Resource: resource.MustStructJSON(mrJSON("KVMProxy", "kvm.m.egressproxy.io",
						`"pool": "vms", "baseImageVolume": "debian-12.qcow2", "diskGiB": 4, "memoryMiB": 768, "vcpus": 2,
						 "network": {"bridge": "br0"}, "domainType": "qemu"`, "")),
					Ready: fnv1.Ready_READY_FALSE,
				}},
			}), "kvm", "default"),
		},
		"KVMBadNetwork": {
			reason: "A kvm network with both a name and a bridge is a fatal result.",
			req: &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				RequiredResources: claimed(),
				Input: resource.MustStructJSON(`{"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1", "kind": "Input", "backend": "kvm",
					"kvm": {"baseImageVolume": "debian-12.qcow2", "network": {"name": "default", "bridge": "br0"}}}`),
				Observed: &fnv1.State{Composite: xr("small")},
			},
			want: claimFatal("the function input's kvm.network must set exactly one of name and bridge"),
		},
	}

	runCases(t, cases)
}
