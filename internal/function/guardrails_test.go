/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"context"
	"fmt"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"k8s.io/utils/ptr"

	"github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
)

func TestViolations(t *testing.T) {
	safe := &v1alpha1.Guardrails{ForbiddenDestinationCIDRs: []string{"0.0.0.0/0", "::/0", "169.254.0.0/16"}}
	strict := &v1alpha1.Guardrails{
		AllowedDestinationSuffixes: []string{"example.com", ".example.org"},
		ForbiddenDestinationCIDRs:  []string{"169.254.0.0/16", "fd00:ec2::/32"},
		MaxClientCIDRPrefix:        &v1alpha1.CIDRPrefixLengths{IPv4: ptr.To[int32](16), IPv6: ptr.To[int32](48)},
		AllowedConnectPorts:        []int32{443, 8443},
		AllowedHTTPPorts:           []int32{80, 443},
	}

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
			reason: "Without guardrails a claim may ask for anything its schema allows.",
			args:   args{s: proxySpec{AllowedClientCIDRs: []string{"0.0.0.0/0"}, AllowedDestinations: []string{"0.0.0.0/0"}}},
		},
		"WithinGuardrails": {
			reason: "Names in the allowed domains, narrow enough client networks and allowed ports break nothing.",
			args: args{g: strict, s: proxySpec{
				AllowedClientCIDRs:  []string{"10.1.0.0/16", "10.1.2.3/32", "fd00:1:2::/48"},
				AllowedDestinations: []string{"example.com", ".api.example.com", "www.example.org", "203.0.113.0/24"},
				AllowedConnectPorts: []int32{443},
				AllowedHTTPPorts:    []int32{80},
			}},
		},
		"ForbiddenCIDR": {
			reason: "A destination CIDR that overlaps a forbidden one, inside or around it, is forbidden; one beside it is not.",
			args: args{g: safe, s: proxySpec{AllowedDestinations: []string{
				"api.example.com", "0.0.0.0/0", "169.254.169.254/32", "::/0", "203.0.113.0/24",
			}}},
			want: want{v: []string{
				`spec.allowedDestinations[1] "0.0.0.0/0" is forbidden by guardrails.forbiddenDestinationCIDRs: it overlaps 0.0.0.0/0`,
				`spec.allowedDestinations[2] "169.254.169.254/32" is forbidden by guardrails.forbiddenDestinationCIDRs: it overlaps 0.0.0.0/0`,
				`spec.allowedDestinations[3] "::/0" is forbidden by guardrails.forbiddenDestinationCIDRs: it overlaps ::/0`,
				`spec.allowedDestinations[4] "203.0.113.0/24" is forbidden by guardrails.forbiddenDestinationCIDRs: it overlaps 0.0.0.0/0`,
			}},
		},
		"ForbiddenAddressesInDisguise": {
			reason: "An IP address written as a host name, and an IPv4-mapped IPv6 network, are checked as the addresses they are.",
			args: args{g: strict, s: proxySpec{AllowedDestinations: []string{
				"169.254.169.254", ".169.254.169.254", "::ffff:169.254.169.254/128", "::ffff:0.0.0.0/96", "fd00:ec2::254",
			}}},
			want: want{v: []string{
				`spec.allowedDestinations[0] "169.254.169.254" is forbidden by guardrails.forbiddenDestinationCIDRs: it overlaps 169.254.0.0/16`,
				`spec.allowedDestinations[1] ".169.254.169.254" is forbidden by guardrails.forbiddenDestinationCIDRs: it overlaps 169.254.0.0/16`,
				`spec.allowedDestinations[2] "::ffff:169.254.169.254/128" is forbidden by guardrails.forbiddenDestinationCIDRs: it overlaps 169.254.0.0/16`,
				`spec.allowedDestinations[3] "::ffff:0.0.0.0/96" is forbidden by guardrails.forbiddenDestinationCIDRs: it overlaps 169.254.0.0/16`,
				`spec.allowedDestinations[4] "fd00:ec2::254" is forbidden by guardrails.forbiddenDestinationCIDRs: it overlaps fd00:ec2::/32`,
			}},
		},
		"NameOutsideSuffixes": {
			reason: "A name outside the allowed domains, including one that only ends in the same letters, is not allowed.",
			args:   args{g: strict, s: proxySpec{AllowedDestinations: []string{".com", "badexample.com", "example.com.evil.io", ".example.org"}}},
			want: want{v: []string{
				`spec.allowedDestinations[0] ".com" is not allowed by guardrails.allowedDestinationSuffixes [example.com .example.org]`,
				`spec.allowedDestinations[1] "badexample.com" is not allowed by guardrails.allowedDestinationSuffixes [example.com .example.org]`,
				`spec.allowedDestinations[2] "example.com.evil.io" is not allowed by guardrails.allowedDestinationSuffixes [example.com .example.org]`,
			}},
		},
		"ClientCIDRTooWide": {
			reason: "A client network wider than the family's limit is not allowed, an IPv4-mapped one counting as IPv4.",
			args:   args{g: strict, s: proxySpec{AllowedClientCIDRs: []string{"10.0.0.0/8", "10.1.0.0/16", "fd00::/8", "::ffff:10.0.0.0/104"}}},
			want: want{v: []string{
				`spec.allowedClientCIDRs[0] "10.0.0.0/8" is wider than guardrails.maxClientCIDRPrefix.ipv4 /16`,
				`spec.allowedClientCIDRs[2] "fd00::/8" is wider than guardrails.maxClientCIDRPrefix.ipv6 /48`,
				`spec.allowedClientCIDRs[3] "::ffff:10.0.0.0/104" is wider than guardrails.maxClientCIDRPrefix.ipv4 /16`,
			}},
		},
		"OneFamilyLimited": {
			reason: "A limit for one family does not limit the other.",
			args: args{
				g: &v1alpha1.Guardrails{MaxClientCIDRPrefix: &v1alpha1.CIDRPrefixLengths{IPv4: ptr.To[int32](24)}},
				s: proxySpec{AllowedClientCIDRs: []string{"::/0", "10.0.0.0/23"}},
			},
			want: want{v: []string{`spec.allowedClientCIDRs[1] "10.0.0.0/23" is wider than guardrails.maxClientCIDRPrefix.ipv4 /24`}},
		},
		"Ports": {
			reason: "Ports outside the allowed ones are not allowed.",
			args:   args{g: strict, s: proxySpec{AllowedConnectPorts: []int32{443, 22}, AllowedHTTPPorts: []int32{80, 8080}}},
			want: want{v: []string{
				`spec.allowedConnectPorts[1] 22 is not in guardrails.allowedConnectPorts [443 8443]`,
				`spec.allowedHTTPPorts[1] 8080 is not in guardrails.allowedHTTPPorts [80 443]`,
			}},
		},
		"DefaultPorts": {
			reason: "An empty port list lets the managed resource's default ports through, so those are checked.",
			args: args{
				g: &v1alpha1.Guardrails{AllowedConnectPorts: []int32{8443}, AllowedHTTPPorts: []int32{80}},
				s: proxySpec{AllowedConnectPorts: []int32{}},
			},
			want: want{v: []string{
				`spec.allowedConnectPorts is empty, so the proxy allows the default port 443, which is not in guardrails.allowedConnectPorts [8443]`,
				`spec.allowedHTTPPorts is empty, so the proxy allows the default port 443, which is not in guardrails.allowedHTTPPorts [80]`,
			}},
		},
		"InvalidForbiddenCIDR": {
			reason: "Guardrails the function cannot read are an error, not a rule that allows everything.",
			args:   args{g: &v1alpha1.Guardrails{ForbiddenDestinationCIDRs: []string{"169.254.0.0/16", "metadata"}}, s: proxySpec{}},
			want:   want{err: errors.Errorf(errFmtForbiddenCIDR, 1, "metadata")},
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

	type args struct {
		req *fnv1.RunFunctionRequest
	}
	type want struct {
		rsp *fnv1.RunFunctionResponse
		err error
	}

	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"NewClaimBreaksGuardrails": {
			reason: "A new claim that breaks the guardrails gets nothing composed, is not ready, and says why on the claim.",
			args: args{req: &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "t"},
				Input:             guarded,
				Observed:          &fnv1.State{Composite: xr("small")},
				RequiredResources: claimed(),
			}},
			want: want{rsp: forbidden(&fnv1.State{
				Composite: &fnv1.Resource{
					Resource:          resource.MustStructJSON(`{"status": {"backend": "kubernetes"}}`),
					ConnectionDetails: map[string][]byte{},
					Ready:             fnv1.Ready_READY_FALSE,
				},
			})},
		},
		"ChangedClaimBreaksGuardrails": {
			reason: "A claim changed to break the guardrails keeps its managed resource as observed, neither deleted nor changed, and its status and connection details.",
			args: args{req: &fnv1.RunFunctionRequest{
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
			}},
			want: want{rsp: forbidden(&fnv1.State{
				Composite: desiredXR(`{"backend": "kubernetes", "endpoint": "10.96.0.10:3128", "egressIP": "203.0.113.7", "instanceID": "egress/web-x7k2p"}`,
					map[string][]byte{"endpoint": []byte("10.96.0.10:3128")}),
				Resources: map[string]*fnv1.Resource{"kubernetes-proxy": {
					Resource: resource.MustStructJSON(`{"apiVersion": "kubernetes.m.egressproxy.io/v1alpha1", "kind": "KubernetesProxy",
						"metadata": {"name": "web-x7k2p-0123456789ab", "namespace": "team-a"},
						"spec": {"forProvider": {"namespace": "egress", "allowedClientCIDRs": ["10.0.0.0/8"]}}}`),
					Ready: fnv1.Ready_READY_TRUE,
				}},
			})},
		},
		"InvalidGuardrails": {
			reason: "Guardrails the function cannot read are a fatal result: Crossplane changes nothing.",
			args: args{req: &fnv1.RunFunctionRequest{
				Meta: &fnv1.RequestMeta{Tag: "t"},
				Input: resource.MustStructJSON(`{"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1", "kind": "Input", "backend": "kubernetes",
					"guardrails": {"forbiddenDestinationCIDRs": ["169.254.0.0"]}}`),
				Observed:          &fnv1.State{Composite: xr("small")},
				RequiredResources: claimed(),
			}},
			want: want{rsp: claimFatal(fmt.Sprintf(errFmtForbiddenCIDR, 0, "169.254.0.0"))},
		},
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := NewFunction(logging.NewNopLogger())
			got, err := f.RunFunction(context.Background(), tc.args.req)
			if diff := cmp.Diff(tc.want.rsp, got, protocmp.Transform()); diff != "" {
				t.Errorf("%s\nf.RunFunction(...): -want rsp, +got rsp:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.err, err); diff != "" {
				t.Errorf("%s\nf.RunFunction(...): -want err, +got err:\n%s", tc.reason, diff)
			}
		})
	}
}
