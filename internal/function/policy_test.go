/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"k8s.io/utils/ptr"
)

// TestRunFunctionConfigPolicy: the function applies the policy of the
// provider config its Composition uses, per-backend rules included, to the
// managed resource it is about to compose, with the provider's messages
// (package policy): a claim the provider would refuse gets nothing new
// composed and says why on the claim, rather than only a failing managed
// resource.
func TestRunFunctionConfigPolicy(t *testing.T) {
	kvmInput := func(bridge string) *fnv1.RunFunctionRequest {
		return &fnv1.RunFunctionRequest{
			Meta: &fnv1.RequestMeta{Tag: "t"},
			Input: resource.MustStructJSON(`{"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1", "kind": "Input", "backend": "kvm",
				"providerConfigRef": {"kind": "ClusterProviderConfig", "name": "lab"},
				"kvm": {"baseImageVolume": "debian-12.qcow2", "network": {"bridge": "` + bridge + `"}}}`),
			Observed: &fnv1.State{Composite: xr("small")},
		}
	}
	kvmLab := `{"apiVersion": "kvm.m.egressproxy.io/v1alpha1", "kind": "ClusterProviderConfig", "metadata": {"name": "lab"},
		"spec": {"credentials": {"source": "None"}, "policy": {"kvm": {"bridges": ["br-proxies"]}}}}`
	kubernetesInput := func(serviceType string) *fnv1.RunFunctionRequest {
		return &fnv1.RunFunctionRequest{
			Meta: &fnv1.RequestMeta{Tag: "t"},
			Input: resource.MustStructJSON(`{"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1", "kind": "Input", "backend": "kubernetes",
				"kubernetes": {"namespace": "egress", "serviceType": "` + serviceType + `"}}`),
			Observed: &fnv1.State{Composite: xr("small")},
		}
	}
	kubernetesDefault := func(policy string) string {
		return `{"apiVersion": "kubernetes.m.egressproxy.io/v1alpha1", "kind": "ClusterProviderConfig", "metadata": {"name": "default"},
			"spec": {"credentials": {"source": "InjectedIdentity"}, "allowedNamespaces": ["egress"], "policy": ` + policy + `}}`
	}
	// withConfig is req once Crossplane has fetched the claim and config
	// (none: not fetched yet).
	withConfig := func(req *fnv1.RunFunctionRequest, config string) *fnv1.RunFunctionRequest {
		req.RequiredResources = claimed()
		if config != "" {
			req.RequiredResources[requiredConfig] = &fnv1.Resources{Items: []*fnv1.Resource{{Resource: resource.MustStructJSON(config)}}}
		}
		return req
	}
	// refused is the response for a new claim the config's policy refuses
	// with msg: nothing composed, not ready, the reason on the claim.
	refused := func(backend, config, msg string) *fnv1.RunFunctionResponse {
		r := rsp(&fnv1.State{Composite: &fnv1.Resource{
			Resource:          resource.MustStructJSON(`{"status": {"backend": "` + backend + `"}}`),
			ConnectionDetails: map[string][]byte{},
			Ready:             fnv1.Ready_READY_FALSE,
		}}, &fnv1.Result{
			Severity: fnv1.Severity_SEVERITY_WARNING,
			Message:  msgBreaksPolicy + msg,
			Target:   fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum(),
		})
		r.Requirements = claimRequirements()
		r.Requirements.Resources[requiredConfig] = configRequirement(backend, config)
		r.Conditions = []*fnv1.Condition{{
			Type: ConditionWithinGuardrails, Status: fnv1.Status_STATUS_CONDITION_FALSE, Reason: ReasonForbidden,
			Message: ptr.To(msg), Target: fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum(),
		}}
		return r
	}
	kvmComposed := func(bridge string) *fnv1.RunFunctionResponse {
		return onConfig(composedRsp(&fnv1.State{
			Composite: desiredXR(`{"backend": "kvm"}`, map[string][]byte{}),
			Resources: map[string]*fnv1.Resource{"kvm-proxy": {
				Resource: resource.MustStructJSON(mrJSON("KVMProxy", "kvm.m.egressproxy.io",
					`"baseImageVolume": "debian-12.qcow2", "memoryMiB": 512, "vcpus": 1, "network": {"bridge": "`+bridge+`"}`,
					`"providerConfigRef": {"kind": "ClusterProviderConfig", "name": "lab"},`)),
				Ready: fnv1.Ready_READY_FALSE,
			}},
		}), "kvm", "lab")
	}

	cases := map[string]runCase{
		"KVMBridgeRefused": {
			reason: "A claim whose Composition puts the VM on a bridge the config's spec.policy.kvm.bridges does not list is refused with the provider's message.",
			req:    withConfig(kvmInput("br-mgmt"), kvmLab),
			want:   refused("kvm", "lab", `spec.forProvider.network.bridge "br-mgmt" is not in ClusterProviderConfig "lab" spec.policy.kvm.bridges`),
		},
		"KVMBridgeAllowed": {
			reason: "A bridge the policy lists is composed.",
			req:    withConfig(kvmInput("br-proxies"), kvmLab),
			want:   kvmComposed("br-proxies"),
		},
		"ConfigNotFetchedYet": {
			reason: "Until Crossplane has fetched the config the function asks for it and composes; Crossplane calls it again with the config.",
			req:    withConfig(kvmInput("br-mgmt"), ""),
			want:   kvmComposed("br-mgmt"),
		},
		"KubernetesServiceTypeRefused": {
			reason: "A Service type the config's spec.policy.kubernetes (empty: ClusterIP only) does not allow is refused with the provider's message.",
			req:    withConfig(kubernetesInput("LoadBalancer"), kubernetesDefault(`{}`)),
			want: refused("kubernetes", "default",
				`spec.forProvider.serviceType "LoadBalancer" is not allowed by ClusterProviderConfig default: its spec.policy.kubernetes.serviceTypes is empty, which allows only "ClusterIP"`),
		},
		"CommonRulesOfTheConfig": {
			reason: "The config's common rules apply too, named as the provider names them.",
			req:    withConfig(kubernetesInput("ClusterIP"), kubernetesDefault(`{"allowedConnectPorts": [8443]}`)),
			want: refused("kubernetes", "default",
				`spec.forProvider.allowedConnectPorts[0] 443 is not in ClusterProviderConfig "default" spec.policy.allowedConnectPorts [8443]`),
		},
	}
	runCases(t, cases)
}
