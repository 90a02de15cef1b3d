/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy_test

import (
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// TestAllowedDestinationsAdmission shows the API server refusing a
// destination name that resolvers read as an IPv4 address (the provider's
// renderer refuses it too: squid's TestRenderValidation), and admitting
// addresses, CIDRs and names that merely contain digits.
func TestAllowedDestinationsAdmission(t *testing.T) {
	e := kube.Shared(t)
	ns := e.Namespace(t, "admission")
	cases := map[string]struct {
		dest  string
		admit bool
	}{
		"Hex":          {dest: "0x08080808"},
		"HexLastLabel": {dest: "a.0x7f"},
		"Decimal":      {dest: "134744072"},
		"Short":        {dest: "127.1"},
		"Octal":        {dest: "010.0.0.1"},
		"Address":      {dest: "203.0.113.7", admit: true},
		"CIDR":         {dest: "203.0.113.0/24", admit: true},
		"Name":         {dest: "api.example.com", admit: true},
		"Suffix":       {dest: ".example.com", admit: true},
		"DigitsInName": {dest: "1password.com", admit: true},
		"HexInName":    {dest: "0xide.example", admit: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mg := &v1alpha1.KubernetesProxy{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.ToLower(name)},
				Spec: v1alpha1.KubernetesProxySpec{
					ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "none"}},
					ForProvider: v1alpha1.KubernetesProxyParameters{Namespace: ns, ProxyParameters: commonv1alpha1.ProxyParameters{
						AllowedClientCIDRs: []string{"10.0.0.0/8"}, AllowedDestinations: []string{tc.dest},
					}},
				},
			}
			err := e.Client.Create(t.Context(), mg, client.DryRunAll)
			switch {
			case tc.admit && err != nil:
				t.Errorf("allowedDestinations [%q]: refused: %v", tc.dest, err)
			case !tc.admit && (!kerrors.IsInvalid(err) || !strings.Contains(err.Error(), "must not end in a number")):
				t.Errorf("allowedDestinations [%q]: got %v, want Invalid: a name must not end in a number", tc.dest, err)
			}
		})
	}
}
