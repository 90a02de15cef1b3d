/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package policy

import (
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

type (
	rules  = commonv1alpha1.ProxyRules
	params = commonv1alpha1.ProxyParameters
)

func TestViolations(t *testing.T) {
	guardrails := Paths{Proxy: "spec", Rules: "guardrails"}
	lab := Paths{Proxy: "spec.forProvider", Rules: `ClusterProviderConfig "lab" spec.policy`}
	safe := rules{ForbiddenDestinationCIDRs: []string{"0.0.0.0/0", "::/0", "169.254.0.0/16"}}
	strict := rules{
		AllowedDestinationSuffixes: []string{"example.com", ".example.org"},
		ForbiddenDestinationCIDRs:  []string{"169.254.0.0/16", "fd00:ec2::/32"},
		MaxClientCIDRPrefix:        &commonv1alpha1.CIDRPrefixLengths{IPv4: ptr.To[int32](16), IPv6: ptr.To[int32](48)},
		AllowedConnectPorts:        []int32{443, 8443},
		AllowedHTTPPorts:           []int32{80, 443},
	}
	lan := rules{AllowedPrivateDestinations: []string{"10.20.0.0/16", "fd00:1::/32"}, AllowedDestinationSuffixes: []string{"corp.internal"}}

	type args struct {
		r  rules
		p  params
		at Paths
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
		"NoRules": {
			reason: "Without rules a proxy may ask for anything its schema allows, private ranges listed too: it denies them itself.",
			args: args{at: guardrails, p: params{
				AllowedClientCIDRs:  []string{"0.0.0.0/0"},
				AllowedDestinations: []string{"0.0.0.0/0", "10.0.0.0/8", "203.0.113.0/24", "api.example.com"},
			}},
		},
		"Within": {
			reason: "Names in the allowed domains, narrow enough client networks and allowed ports break nothing.",
			args: args{r: strict, at: guardrails, p: params{
				AllowedClientCIDRs:  []string{"10.1.0.0/16", "10.1.2.3/32", "fd00:1:2::/48"},
				AllowedDestinations: []string{"example.com", ".api.example.com", "www.example.org", "8.8.8.0/24"},
				AllowedConnectPorts: []int32{443},
				AllowedHTTPPorts:    []int32{80},
			}},
		},
		"ForbiddenCIDR": {
			reason: "A destination CIDR that overlaps a forbidden one, inside or around it, is forbidden; one beside it is not.",
			args: args{r: safe, at: guardrails, p: params{AllowedDestinations: []string{
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
			args: args{r: strict, at: guardrails, p: params{AllowedDestinations: []string{
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
		"NumericHostNames": {
			reason: "A name a resolver reads as an IPv4 address (decimal, hex, octal, short forms) slips past every CIDR rule, so it is refused even without rules.",
			args:   args{at: guardrails, p: params{AllowedDestinations: []string{"134744072", "0x08080808", "10.1", ".a.0x7f", "x1.example.com", "0xcafe.example"}}},
			want: want{v: []string{
				`spec.allowedDestinations[0] "134744072" is a numeric host form that resolves to an address no CIDR rule sees: write the address as a.b.c.d or a CIDR`,
				`spec.allowedDestinations[1] "0x08080808" is a numeric host form that resolves to an address no CIDR rule sees: write the address as a.b.c.d or a CIDR`,
				`spec.allowedDestinations[2] "10.1" is a numeric host form that resolves to an address no CIDR rule sees: write the address as a.b.c.d or a CIDR`,
				`spec.allowedDestinations[3] ".a.0x7f" is a numeric host form that resolves to an address no CIDR rule sees: write the address as a.b.c.d or a CIDR`,
			}},
		},
		"NameOutsideSuffixes": {
			reason: "A name outside the allowed domains, including one that only ends in the same letters, is not allowed.",
			args:   args{r: strict, at: guardrails, p: params{AllowedDestinations: []string{".com", "badexample.com", "example.com.evil.io", ".example.org"}}},
			want: want{v: []string{
				`spec.allowedDestinations[0] ".com" is not allowed by guardrails.allowedDestinationSuffixes [example.com .example.org]`,
				`spec.allowedDestinations[1] "badexample.com" is not allowed by guardrails.allowedDestinationSuffixes [example.com .example.org]`,
				`spec.allowedDestinations[2] "example.com.evil.io" is not allowed by guardrails.allowedDestinationSuffixes [example.com .example.org]`,
			}},
		},
		"PrivateDestinationsWithoutPolicy": {
			reason: "With no policy a proxy may not turn denyPrivateDestinations off, nor reach a private range or any name with it off.",
			args: args{at: lab, p: params{
				DenyPrivateDestinations: ptr.To(false),
				AllowedDestinations:     []string{"10.0.0.0/8", "8.8.8.8", "api.example.com"},
			}},
			want: want{v: []string{
				`spec.forProvider.denyPrivateDestinations false is not allowed: ClusterProviderConfig "lab" spec.policy.allowedPrivateDestinations lists no private range the proxy may reach`,
				`spec.forProvider.allowedDestinations[0] "10.0.0.0/8" is a private range not in ClusterProviderConfig "lab" spec.policy.allowedPrivateDestinations`,
				`spec.forProvider.allowedDestinations[2] "api.example.com" is a host name, which may resolve to any private address while denyPrivateDestinations is false: ClusterProviderConfig "lab" spec.policy.allowedDestinationSuffixes must list its domain`,
			}},
		},
		"PrivateDestinationsWithinPolicy": {
			reason: "With denyPrivateDestinations off, destinations inside the allowed private ranges and names in the allowed domains are allowed.",
			args: args{r: lan, at: lab, p: params{
				DenyPrivateDestinations: ptr.To(false),
				AllowedDestinations:     []string{"10.20.0.0/16", "10.20.1.5", "fd00:1:2::/48", "8.8.8.0/24", "git.corp.internal", ".corp.internal"},
			}},
		},
		"PrivateDestinationsBeyondPolicy": {
			reason: "With denyPrivateDestinations off, a destination reaching a private range beyond the allowed ones, a wider network around them, or a name outside the domains is refused.",
			args: args{r: lan, at: lab, p: params{
				DenyPrivateDestinations: ptr.To(false),
				AllowedDestinations:     []string{"10.0.0.0/8", "10.21.0.0/16", "0.0.0.0/0", "::ffff:10.0.0.0/104", "169.254.169.254", "evil.example"},
			}},
			want: want{v: []string{
				`spec.forProvider.allowedDestinations[0] "10.0.0.0/8" is a private range not in ClusterProviderConfig "lab" spec.policy.allowedPrivateDestinations`,
				`spec.forProvider.allowedDestinations[1] "10.21.0.0/16" is a private range not in ClusterProviderConfig "lab" spec.policy.allowedPrivateDestinations`,
				`spec.forProvider.allowedDestinations[2] "0.0.0.0/0" reaches the private range 0.0.0.0/8, which is not in ClusterProviderConfig "lab" spec.policy.allowedPrivateDestinations`,
				`spec.forProvider.allowedDestinations[3] "::ffff:10.0.0.0/104" is a private range not in ClusterProviderConfig "lab" spec.policy.allowedPrivateDestinations`,
				`spec.forProvider.allowedDestinations[4] "169.254.169.254" is a private range not in ClusterProviderConfig "lab" spec.policy.allowedPrivateDestinations`,
				`spec.forProvider.allowedDestinations[5] "evil.example" is not allowed by ClusterProviderConfig "lab" spec.policy.allowedDestinationSuffixes [corp.internal]`,
			}},
		},
		"ClientCIDRTooWide": {
			reason: "A client network wider than the family's limit is not allowed, an IPv4-mapped one counting as IPv4.",
			args:   args{r: strict, at: guardrails, p: params{AllowedClientCIDRs: []string{"10.0.0.0/8", "10.1.0.0/16", "fd00::/8", "::ffff:10.0.0.0/104"}}},
			want: want{v: []string{
				`spec.allowedClientCIDRs[0] "10.0.0.0/8" is wider than guardrails.maxClientCIDRPrefix.ipv4 /16`,
				`spec.allowedClientCIDRs[2] "fd00::/8" is wider than guardrails.maxClientCIDRPrefix.ipv6 /48`,
				`spec.allowedClientCIDRs[3] "::ffff:10.0.0.0/104" is wider than guardrails.maxClientCIDRPrefix.ipv4 /16`,
			}},
		},
		"OneFamilyLimited": {
			reason: "A limit for one family does not limit the other.",
			args: args{
				r:  rules{MaxClientCIDRPrefix: &commonv1alpha1.CIDRPrefixLengths{IPv4: ptr.To[int32](24)}},
				at: guardrails,
				p:  params{AllowedClientCIDRs: []string{"::/0", "10.0.0.0/23"}},
			},
			want: want{v: []string{`spec.allowedClientCIDRs[1] "10.0.0.0/23" is wider than guardrails.maxClientCIDRPrefix.ipv4 /24`}},
		},
		"Ports": {
			reason: "Ports outside the allowed ones are not allowed.",
			args:   args{r: strict, at: lab, p: params{AllowedConnectPorts: []int32{443, 22}, AllowedHTTPPorts: []int32{80, 8080}}},
			want: want{v: []string{
				`spec.forProvider.allowedConnectPorts[1] 22 is not in ClusterProviderConfig "lab" spec.policy.allowedConnectPorts [443 8443]`,
				`spec.forProvider.allowedHTTPPorts[1] 8080 is not in ClusterProviderConfig "lab" spec.policy.allowedHTTPPorts [80 443]`,
			}},
		},
		"DefaultPorts": {
			reason: "An empty port list lets the managed resource's default ports through, so those are checked.",
			args: args{
				r:  rules{AllowedConnectPorts: []int32{8443}, AllowedHTTPPorts: []int32{80}},
				at: guardrails,
				p:  params{AllowedConnectPorts: []int32{}},
			},
			want: want{v: []string{
				`spec.allowedConnectPorts is empty, so the proxy allows the default port 443, which is not in guardrails.allowedConnectPorts [8443]`,
				`spec.allowedHTTPPorts is empty, so the proxy allows the default port 443, which is not in guardrails.allowedHTTPPorts [80]`,
			}},
		},
		"InvalidForbiddenCIDR": {
			reason: "Rules that cannot be read are an error, not a rule that allows everything.",
			args:   args{r: rules{ForbiddenDestinationCIDRs: []string{"169.254.0.0/16", "metadata"}}, at: guardrails},
			want:   want{err: errors.Errorf(errFmtBadCIDR, "guardrails", "forbiddenDestinationCIDRs", 1, "metadata")},
		},
		"InvalidPrivateCIDR": {
			reason: "An allowed private range that cannot be read is an error, not a rule that allows everything.",
			args:   args{r: rules{AllowedPrivateDestinations: []string{"10.0.0.0"}}, at: lab},
			want:   want{err: errors.Errorf(errFmtBadCIDR, `ClusterProviderConfig "lab" spec.policy`, "allowedPrivateDestinations", 0, "10.0.0.0")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v, err := Violations(tc.args.r, tc.args.p, tc.args.at)
			if diff := cmp.Diff(tc.want.v, v); diff != "" {
				t.Errorf("%s\nViolations(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\nViolations(...): -want err, +got err:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestNamespaceViolation(t *testing.T) {
	lab := Paths{Rules: `ClusterProviderConfig "lab" spec.policy`}
	teams := &metav1.LabelSelector{MatchLabels: map[string]string{"egressproxy.io/lab": "true"}}

	type args struct {
		sel    *metav1.LabelSelector
		ns     string
		labels map[string]string
	}
	type want struct {
		v   string
		err error
	}

	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"NoSelector": {
			reason: "A config without a selector may be used from every namespace.",
			args:   args{ns: "team-b"},
		},
		"Selected": {
			reason: "A namespace the selector matches may use the config.",
			args:   args{sel: teams, ns: "team-a", labels: map[string]string{"egressproxy.io/lab": "true"}},
		},
		"NotSelected": {
			reason: "A namespace the selector does not match may not use the config.",
			args:   args{sel: teams, ns: "team-b", labels: map[string]string{"egressproxy.io/lab": "false"}},
			want:   want{v: `namespace "team-b" is not selected by ClusterProviderConfig "lab" spec.policy.namespaceSelector`},
		},
		"EmptySelector": {
			reason: "An empty selector selects every namespace, as a label selector does.",
			args:   args{sel: &metav1.LabelSelector{}, ns: "team-b"},
		},
		"InvalidSelector": {
			reason: "A selector that cannot be read is an error, not one that selects everything.",
			args:   args{sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}, ns: "team-b"},
			want:   want{err: errors.Wrapf(errors.New(`"Near" is not a valid label selector operator`), errFmtBadSelector, lab.Rules)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v, err := NamespaceViolation(tc.args.sel, tc.args.ns, tc.args.labels, lab)
			if diff := cmp.Diff(tc.want.v, v); diff != "" {
				t.Errorf("%s\nNamespaceViolation(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\nNamespaceViolation(...): -want err, +got err:\n%s", tc.reason, diff)
			}
		})
	}
}
