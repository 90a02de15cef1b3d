/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
)

func TestGeneratedSecretName(t *testing.T) {
	named := func(n string) *v1alpha1.KubernetesProxy {
		return &v1alpha1.KubernetesProxy{ObjectMeta: metav1.ObjectMeta{Name: n}}
	}
	long := strings.Repeat("a", 240)
	cases := map[string]struct {
		reason string
		name   string
		kind   string
		want   string
	}{
		"Short": {reason: "The kind is part of the name.", name: "web", kind: "GCPProxy", want: "web-gcpproxy-credentials"},
		"Long": {reason: "A name too long for a Secret is cut and made unique with a hash.", name: long + ".b", kind: "KubernetesProxy",
			want: strings.Repeat("a", 216) + "-ec312dd9-kubernetesproxy-credentials"},
		"CutAtDot": {reason: "A cut that ends in a dot drops it: a Secret name's labels end in a letter or digit.", name: strings.Repeat("a", 215) + "." + strings.Repeat("b", 40), kind: "KubernetesProxy",
			want: strings.Repeat("a", 215) + "-4e5fa438-kubernetesproxy-credentials"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := GeneratedSecretName(named(tc.name), tc.kind)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nGeneratedSecretName(): -want, +got:\n%s", tc.reason, diff)
			}
			if errs := validation.IsDNS1123Subdomain(got); len(errs) != 0 {
				t.Errorf("%s\n%q is not a valid Secret name: %v", tc.reason, got, errs)
			}
		})
	}
	if GeneratedSecretName(named(long+".b"), "KVMProxy") == GeneratedSecretName(named(long+".c"), "KVMProxy") {
		t.Error("long names that differ only past the cut must not share a Secret")
	}
}

func TestIsGenerated(t *testing.T) {
	pw, err := randomPassword()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason   string
		password string
		want     bool
	}{
		"Generated":  {reason: "A password randomPassword made is generated.", password: pw, want: true},
		"Short":      {reason: "A password of another length was written by someone else.", password: "hunter2", want: false},
		"SameLength": {reason: "A password of the right length with a character outside the alphabet is not generated.", password: strings.Repeat("l", generatedPasswordLength), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, isGenerated(tc.password)); diff != "" {
				t.Errorf("%s\nisGenerated(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
