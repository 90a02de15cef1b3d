/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package backend

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
)

var ownership = Ownership{Owner: Owner{UID: "0b3c1e0e-5f3a-4c1e-9a57-1a2b3c4d5e6f", Namespace: "team-a", Name: "proxy"}, ProviderInstance: "default"}

func TestLabelsRoundTrip(t *testing.T) {
	for name, keys := range map[string]LabelKeys{"Kubernetes": KubernetesLabelKeys, "Cloud": CloudLabelKeys} {
		t.Run(name, func(t *testing.T) {
			got, ok := OwnershipFromLabels(keys, ownership.Labels(keys))
			if !ok {
				t.Fatalf("OwnershipFromLabels: labels written by Labels must read back as ours")
			}
			if diff := cmp.Diff(ownership, got); diff != "" {
				t.Errorf("round trip: -want, +got:\n%s", diff)
			}
		})
	}
}

func TestCloudLabelsAreGCESafe(t *testing.T) {
	key := regexp.MustCompile(`^[a-z][-_a-z0-9]{0,62}$`)
	value := regexp.MustCompile(`^[-_a-z0-9]{0,63}$`)
	for k, v := range ownership.Labels(CloudLabelKeys) {
		if !key.MatchString(k) || !value.MatchString(v) {
			t.Errorf("label %s=%s is not a valid GCE label", k, v)
		}
	}
}

func TestLabelValue(t *testing.T) {
	cases := map[string]struct {
		in, want string
	}{
		"Plain":     {in: "team-a", want: "team-a"},
		"Dots":      {in: "proxy.v2", want: "proxy-v2"},
		"UpperCase": {in: "Team", want: "team"},
		"Long":      {in: strings.Repeat("a", 70), want: strings.Repeat("a", 63)},
		"CutAtDash": {in: strings.Repeat("a", 62) + "-b", want: strings.Repeat("a", 62)},
		"Composed":  {in: "payments-egress-x7k2p-9fj3d", want: "payments-egress-x7k2p-9fj3d"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, LabelValue(tc.in)); diff != "" {
				t.Errorf("LabelValue(%q): -want, +got:\n%s", tc.in, diff)
			}
		})
	}
}

func TestOwnedBy(t *testing.T) {
	other := ownership
	other.Owner.UID = "someone-else"
	otherProvider := ownership
	otherProvider.ProviderInstance = "staging"
	cases := map[string]struct {
		reason string
		labels map[string]string
		want   bool
	}{
		"Ours":          {reason: "Our own labels match.", labels: ownership.Labels(KubernetesLabelKeys), want: true},
		"OtherOwner":    {reason: "Another resource's instance must not be adopted.", labels: other.Labels(KubernetesLabelKeys), want: false},
		"OtherProvider": {reason: "Another provider deployment's instance must not be adopted.", labels: otherProvider.Labels(KubernetesLabelKeys), want: false},
		"Unlabelled":    {reason: "Something nobody labelled is not ours.", labels: map[string]string{"app": "squid"}, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, OwnedBy(KubernetesLabelKeys, tc.labels, ownership)); diff != "" {
				t.Errorf("%s\nOwnedBy(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCollectable(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	gone := func(types.UID) bool { return false }
	exists := func(types.UID) bool { return true }
	old := Instance{Ownership: ownership, CreatedAt: now.Add(-time.Hour)}
	cases := map[string]struct {
		reason string
		in     Instance
		owner  func(types.UID) bool
		want   bool
	}{
		"Orphan":        {reason: "An old instance whose owner is gone is collected.", in: old, owner: gone, want: true},
		"OwnerExists":   {reason: "An instance whose owner exists is kept.", in: old, owner: exists, want: false},
		"Young":         {reason: "A young instance is kept: its owner may not be in the cache yet.", in: Instance{Ownership: ownership, CreatedAt: now.Add(-time.Minute)}, owner: gone, want: false},
		"ZeroCreatedAt": {reason: "An instance without a creation time is never collected.", in: Instance{Ownership: ownership}, owner: gone, want: false},
		"UnownedPart":   {reason: "A part without an ownership record (a volume whose domain is gone) is collected on age.", in: Instance{State: commonv1alpha1.StateTerminated, CreatedAt: old.CreatedAt}, owner: gone, want: true},
		"UnownedYoung":  {reason: "A young part without an ownership record is kept: its Create may be under way.", in: Instance{State: commonv1alpha1.StateTerminated, CreatedAt: now}, owner: gone, want: false},
		"UnownedLive":   {reason: "A part without an ownership record that is not Terminated is kept.", in: Instance{State: commonv1alpha1.StateRunning, CreatedAt: old.CreatedAt}, owner: gone, want: false},
		"OtherProvider": {reason: "Another provider deployment's instance is never collected.", in: Instance{Ownership: Ownership{Owner: ownership.Owner, ProviderInstance: "staging"}, CreatedAt: old.CreatedAt}, owner: gone, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Collectable(tc.in, "default", tc.owner, 10*time.Minute, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nCollectable(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
