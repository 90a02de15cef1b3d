/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	clientfeatures "k8s.io/client-go/features"
)

// allOn is a set of gates with every feature on.
type allOn struct{}

func (allOn) Enabled(clientfeatures.Feature) bool { return true }

func TestInformerGates(t *testing.T) {
	unset := func(string) (string, bool) { return "", false }
	set := func(k string) (string, bool) { return "true", k == envWatchList }
	cases := map[string]struct {
		reason  string
		env     func(string) (string, bool)
		feature clientfeatures.Feature
		want    bool
	}{
		"WatchListOff": {
			reason: "Informers list from the watch cache unless told otherwise.",
			env:    unset, feature: clientfeatures.WatchListClient, want: false,
		},
		"OthersUnchanged": {
			reason: "Every other gate is the wrapped gates' answer.",
			env:    unset, feature: clientfeatures.InOrderInformers, want: true,
		},
		"EnvironmentDecides": {
			reason: "KUBE_FEATURE_WatchListClient in the environment is client-go's to read.",
			env:    set, feature: clientfeatures.WatchListClient, want: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := informerGates(allOn{}, tc.env).Enabled(tc.feature)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nEnabled(%s): -want, +got:\n%s", tc.reason, tc.feature, diff)
			}
		})
	}
}
