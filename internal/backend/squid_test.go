/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package backend

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

func TestSquidConfig(t *testing.T) {
	no := false
	cases := map[string]struct {
		reason  string
		p       commonv1alpha1.ProxyParameters
		private []string
		want    squid.Config
	}{
		"Defaults": {
			reason: "An object no API server defaulted gets the API defaults, the private check on.",
			p:      commonv1alpha1.ProxyParameters{AllowedClientCIDRs: []string{"10.0.0.0/8"}},
			want: squid.Config{
				Port: DefaultPort, ClientCIDRs: []string{"10.0.0.0/8"}, ConnectPorts: []int32{443},
				HTTPPorts: []int32{80, 443}, DenyPrivateDestinations: true,
			},
		},
		"Explicit": {
			reason: "Every set field reaches the renderer as it is.",
			p: commonv1alpha1.ProxyParameters{
				Port: 8080, AllowedClientCIDRs: []string{"10.0.0.0/8"}, AllowedDestinations: []string{"a.example"},
				AllowedConnectPorts: []int32{8443}, AllowedHTTPPorts: []int32{8080}, DenyPrivateDestinations: &no,
			},
			private: []string{"10.20.0.0/16"},
			want: squid.Config{
				Port: 8080, ClientCIDRs: []string{"10.0.0.0/8"}, Destinations: []string{"a.example"},
				ConnectPorts: []int32{8443}, HTTPPorts: []int32{8080}, AllowedPrivateDestinations: []string{"10.20.0.0/16"},
			},
		},
		"PrivateRangesOnlyWhenAllowed": {
			reason:  "The policy's private ranges do not change the configuration of a proxy that denies every private range.",
			p:       commonv1alpha1.ProxyParameters{AllowedClientCIDRs: []string{"10.0.0.0/8"}},
			private: []string{"10.20.0.0/16"},
			want: squid.Config{
				Port: DefaultPort, ClientCIDRs: []string{"10.0.0.0/8"}, ConnectPorts: []int32{443},
				HTTPPorts: []int32{80, 443}, DenyPrivateDestinations: true,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, SquidConfig(Desired[struct{}]{Proxy: tc.p, AllowedPrivateDestinations: tc.private})); diff != "" {
				t.Errorf("\n%s\nSquidConfig(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestSquidConfigDefaultsMatchCRDs pins the defaults SquidConfig fills in to
// the defaults every proxy CRD declares, so an object an API server
// defaulted and one it did not render the same configuration.
func TestSquidConfigDefaultsMatchCRDs(t *testing.T) {
	want := map[string]any{"port": float64(DefaultPort), "allowedConnectPorts": []any{float64(DefaultConnectPort)}, "allowedHTTPPorts": []any{}, "denyPrivateDestinations": true}
	for _, p := range DefaultHTTPPorts() {
		want["allowedHTTPPorts"] = append(want["allowedHTTPPorts"].([]any), float64(p)) //nolint:forcetypeassert // Set just above.
	}
	crds, err := filepath.Glob(filepath.Join("..", "..", "package", "provider", "crds", "*proxies.yaml"))
	if err != nil || len(crds) != 3 {
		t.Fatalf("want the three proxy CRDs, got %v (%v)", crds, err)
	}
	for _, f := range crds {
		b, err := os.ReadFile(f) //nolint:gosec // The repository's own CRDs.
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Versions []struct {
					Schema struct {
						OpenAPIV3Schema struct {
							Properties struct {
								Spec struct {
									Properties struct {
										ForProvider struct {
											Properties map[string]struct {
												Default any `json:"default"`
											} `json:"properties"`
										} `json:"forProvider"`
									} `json:"properties"`
								} `json:"spec"`
							} `json:"properties"`
						} `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(b, &crd); err != nil || len(crd.Spec.Versions) == 0 {
			t.Fatalf("%s: %v", f, err)
		}
		props := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties.Spec.Properties.ForProvider.Properties
		got := map[string]any{}
		for k := range want {
			got[k] = props[k].Default
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: forProvider defaults: -SquidConfig, +CRD:\n%s", filepath.Base(f), diff)
		}
	}
}
