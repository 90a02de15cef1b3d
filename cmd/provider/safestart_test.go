/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"k8s.io/client-go/rest"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

func TestCRDGate(t *testing.T) {
	e := kube.Start(t)
	nobody := rest.CopyConfig(e.Config)
	nobody.Impersonate = rest.ImpersonationConfig{UserName: "nobody"}
	cases := map[string]struct {
		reason   string
		cfg      *rest.Config
		wantGate bool
	}{
		"MayListCRDs": {
			reason:   "A provider that may list CRDs starts each backend once its CRDs are there.",
			cfg:      e.Config,
			wantGate: true,
		},
		"MayNotListCRDs": {
			reason:   "A provider that may not list CRDs starts every backend at once rather than none.",
			cfg:      nobody,
			wantGate: false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g, err := crdGate(t.Context(), tc.cfg, logging.NewNopLogger())
			if err != nil {
				t.Fatalf("%s\ncrdGate(...): %v", tc.reason, err)
			}
			if got := g != nil; got != tc.wantGate {
				t.Errorf("%s\ncrdGate(...): gate %v, want gate %v", tc.reason, got, tc.wantGate)
			}
		})
	}
}
