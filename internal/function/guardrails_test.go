/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"fmt"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
)

// TestViolations checks the function applies its guardrails with package
// policy, whose own tests hold the rules, and names the claim's fields.
func TestViolations(t *testing.T) {
	type args struct {
		g *v1alpha1.Guardrails
		s proxySpec
	}
	type want struct {
		v   []string
		err error
	}

	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"NoGuardrails": {
			reason: "Without guardrails a claim may ask for anything its schema allows: its proxy denies private destinations.",
			args:   args{s: proxySpec{AllowedClientCIDRs: []string{"0.0.0.0/0"}, AllowedDestinations: []string{"0.0.0.0/0", "10.0.0.0/8"}}},
		},
		"NumericHostWithoutGuardrails": {
			reason: "The rules that hold without a policy hold without guardrails.",
			args:   args{s: proxySpec{AllowedClientCIDRs: []string{"10.0.0.0/8"}, AllowedDestinations: []string{"0x08080808"}}},
			want: want{v: []string{
				`spec.allowedDestinations[0] "0x08080808" is a numeric host form that resolves to an address no CIDR rule sees: write the address as a.b.c.d or a CIDR`,
			}},
		},
		"BreaksGuardrails": {
			reason: "Each part of the claim that breaks a guardrail is named, as the claim and the input write it.",
			args: args{
				g: &v1alpha1.Guardrails{ProxyRules: commonv1alpha1.ProxyRules{
					ForbiddenDestinationCIDRs: []string{"169.254.0.0/16"},
					MaxClientCIDRPrefix:       &commonv1alpha1.CIDRPrefixLengths{IPv4: ptr.To[int32](16)},
					AllowedConnectPorts:       []int32{8443},
				}},
				s: proxySpec{AllowedClientCIDRs: []string{"10.0.0.0/8"}, AllowedDestinations: []string{"169.254.169.254"}},
			},
			want: want{v: []string{
				`spec.allowedDestinations[0] "169.254.169.254" is forbidden by guardrails.forbiddenDestinationCIDRs: it overlaps 169.254.0.0/16`,
				`spec.allowedClientCIDRs[0] "10.0.0.0/8" is wider than guardrails.maxClientCIDRPrefix.ipv4 /16`,
				`spec.allowedConnectPorts is empty, so the proxy allows the default port 443, which is not in guardrails.allowedConnectPorts [8443]`,
			}},
		},
		"InvalidGuardrails": {
			reason: "Guardrails the function cannot read are an error, not a rule that allows everything.",
			args:   args{g: &v1alpha1.Guardrails{ProxyRules: commonv1alpha1.ProxyRules{ForbiddenDestinationCIDRs: []string{"169.254.0.0/16", "metadata"}}}},
			want:   want{err: errors.Wrap(errors.New(`guardrails.forbiddenDestinationCIDRs[1] "metadata" is not a CIDR`), errGuardrails)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v, err := violations(tc.args.g, tc.args.s)
			if diff := cmp.Diff(tc.want.v, v); diff != "" {
				t.Errorf("%s\nviolations(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\nviolations(...): -want err, +got err:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRunFunctionGuardrails(t *testing.T) {
	guarded := resource.MustStructJSON(`{"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1", "kind": "Input", "backend": "kubernetes",
		"kubernetes": {"namespace": "egress"},
		"guardrails": {"forbiddenDestinationCIDRs": ["0.0.0.0/0", "::/0"], "maxClientCIDRPrefix": {"ipv4": 16}}}`)
	// The claim asks for client network 10.0.0.0/8, wider than /16.
	const msg = `spec.allowedClientCIDRs[0] "10.0.0.0/8" is wider than guardrails.maxClientCIDRPrefix.ipv4 /16`
	forbidden := func(desired *fnv1.State) *fnv1.RunFunctionResponse {
		r := rsp(desired, &fnv1.Result{
			Severity: fnv1.Severity_SEVERITY_WARNING,
			Message:  msgBreaksGuardrails + msg,
			Target:   fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum(),
		})
		r.Requirements = claimRequirements()
		r.Conditions = []*fnv1.Condition{{
			Type: ConditionWithinGuardrails, Status: fnv1.Status_STATUS_CONDITION_FALSE, Reason: ReasonForbidden,
			Message: ptr.To(msg), Target: fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum(),
		}}
		return r
	}
	observedMR := fmt.Sprintf(observedMRJSON, readyTrue)

	cases := map[string]runCase{
		"NewClaimBreaksGuardrails": {
			reason: "A new claim that breaks the guardrails gets nothing composed, is not ready, and says why on the claim.",
			req: &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				Input:             guarded,
				Observed:          &fnv1.State{Composite: xr("small")},
				RequiredResources: claimed(),
			},
			want: forbidden(&fnv1.State{
				Composite: &fnv1.Resource{
					Resource:          resource.MustStructJSON(`{"status": {"backend": "kubernetes"}}`),
					ConnectionDetails: map[string][]byte{},
					Ready:             fnv1.Ready_READY_FALSE,
				},
			}),
		},
		"ChangedClaimBreaksGuardrails": {
			reason: "A claim changed to break the guardrails keeps its managed resource as observed, neither deleted nor changed, and its status and connection details.",
			req: &fnv1.RunFunctionRequest{
				Meta:  &fnv1.RequestMeta{Tag: "t"},
				Input: guarded,
				Observed: &fnv1.State{
					Composite: xr("small"),
					Resources: map[string]*fnv1.Resource{"kubernetes-proxy": {
						Resource:          resource.MustStructJSON(observedMR),
						ConnectionDetails: map[string][]byte{"endpoint": []byte("10.96.0.10:3128")},
					}},
				},
				RequiredResources: claimed(),
			},
			want: forbidden(&fnv1.State{
				Composite: desiredXR(`{"backend": "kubernetes", "endpoint": "10.96.0.10:3128", "egressIP": "203.0.113.7", "instanceID": "egress/web-x7k2p"}`,
					map[string][]byte{"endpoint": []byte("10.96.0.10:3128")}),
				Resources: map[string]*fnv1.Resource{"kubernetes-proxy": {
					Resource: resource.MustStructJSON(`{"apiVersion": "kubernetes.m.egressproxy.io/v1alpha1", "kind": "KubernetesProxy",
						"metadata": {"name": "web-x7k2p-0123456789ab", "namespace": "team-a"},
						"spec": {"forProvider": {"namespace": "egress", "allowedClientCIDRs": ["10.0.0.0/8"]}}}`),
					Ready: fnv1.Ready_READY_TRUE,
				}},
			}),
		},
		"InvalidGuardrails": {
			reason: "Guardrails the function cannot read are a fatal result: Crossplane changes nothing.",
			req: &fnv1.RunFunctionRequest{
				Meta: &fnv1.RequestMeta{Tag: "t"},
				Input: resource.MustStructJSON(`{"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1", "kind": "Input", "backend": "kubernetes",
					"guardrails": {"forbiddenDestinationCIDRs": ["169.254.0.0"]}}`),
				Observed:          &fnv1.State{Composite: xr("small")},
				RequiredResources: claimed(),
			},
			want: claimFatal(errGuardrails + `: guardrails.forbiddenDestinationCIDRs[0] "169.254.0.0" is not a CIDR`),
		},
	}

	runCases(t, cases)
}
