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

func TestValidateInstance(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		ok     bool
	}{
		"Derived":       {reason: "The derived default is canonical.", in: "provider-egressproxy-0b3c1e0e-5f3a-4c1e-9a57-1a2b3c4d5e6f", ok: true},
		"Plain":         {reason: "Lower-case letters, digits, dashes and underscores are kept.", in: "prod_eu-1", ok: true},
		"Empty":         {reason: "An empty instance would match unlabelled parts.", in: ""},
		"UpperCase":     {reason: "Prod-EU would be folded into prod-eu.", in: "Prod-EU"},
		"Dots":          {reason: "prod.eu would be folded into prod-eu.", in: "prod.eu"},
		"TooLong":       {reason: "A value over 63 characters would be cut, so two could collide.", in: strings.Repeat("a", 64)},
		"LeadingDash":   {reason: "A leading dash would be trimmed.", in: "-prod"},
		"TrailingUnder": {reason: "A trailing underscore would be trimmed.", in: "prod_"},
		"Space":         {reason: "A space would become a dash.", in: "prod eu"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := ValidateInstance(tc.in)
			if (err == nil) != tc.ok {
				t.Errorf("%s\nValidateInstance(%q): want ok=%t, got %v", tc.reason, tc.in, tc.ok, err)
			}
		})
	}
}

func TestOwnedBy(t *testing.T) {
	other := ownership
	other.Owner.UID = "someone-else"
	otherProvider := ownership
	otherProvider.ProviderInstance = "staging"
	folded := ownership
	folded.ProviderInstance = "prod-eu"
	unlabelledInstance := ownership.Labels(KubernetesLabelKeys)
	delete(unlabelledInstance, KubernetesLabelKeys.ProviderInstance)
	cases := map[string]struct {
		reason string
		labels map[string]string
		want   Ownership
		owned  bool
	}{
		"Ours":          {reason: "Our own labels match.", labels: ownership.Labels(KubernetesLabelKeys), want: ownership, owned: true},
		"OtherOwner":    {reason: "Another resource's instance must not be adopted.", labels: other.Labels(KubernetesLabelKeys), want: ownership},
		"OtherProvider": {reason: "Another provider deployment's instance must not be adopted.", labels: otherProvider.Labels(KubernetesLabelKeys), want: ownership},
		"Unlabelled":    {reason: "Something nobody labelled is not ours.", labels: map[string]string{"app": "squid"}, want: ownership},
		"Folded": {
			reason: "prod-eu is another installation than prod.eu: the comparison is exact, not through LabelValue.",
			labels: folded.Labels(KubernetesLabelKeys), want: Ownership{Owner: ownership.Owner, ProviderInstance: "prod.eu"},
		},
		"NoInstanceLabel": {
			reason: "A part without the provider instance label is not ours, even for an empty instance.",
			labels: unlabelledInstance, want: Ownership{Owner: ownership.Owner},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.owned, OwnedBy(KubernetesLabelKeys, tc.labels, tc.want)); diff != "" {
				t.Errorf("%s\nOwnedBy(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	gone := func(types.UID) bool { return false }
	exists := func(types.UID) bool { return true }
	old := Instance{Ownership: ownership, CreatedAt: now.Add(-time.Hour)}
	with := func(pi string) Instance {
		in := old
		in.Ownership.ProviderInstance = pi
		return in
	}
	cases := map[string]struct {
		reason string
		in     Instance
		ours   string
		owner  func(types.UID) bool
		want   Verdict
	}{
		"Orphan":        {reason: "An old instance of ours whose owner is gone is collected.", in: old, ours: "default", owner: gone, want: VerdictCollect},
		"OwnerExists":   {reason: "An instance whose owner exists is kept.", in: old, ours: "default", owner: exists, want: VerdictLive},
		"Young":         {reason: "A young instance is kept: its owner may not be in the cache yet.", in: Instance{Ownership: ownership, CreatedAt: now.Add(-time.Minute)}, ours: "default", owner: gone, want: VerdictYoung},
		"ZeroCreatedAt": {reason: "An instance without a creation time is never collected.", in: Instance{Ownership: ownership}, ours: "default", owner: gone, want: VerdictYoung},
		"OtherProvider": {reason: "Another installation's instance is never collected.", in: with("staging"), ours: "default", owner: gone, want: VerdictForeign},
		"Folded":        {reason: "prod-eu is not prod.eu: no sanitising before the comparison.", in: with("prod-eu"), ours: "prod.eu", owner: gone, want: VerdictForeign},
		"Truncated": {
			reason: "A value cut to 63 characters is another installation.",
			in:     with(strings.Repeat("a", 63)), ours: strings.Repeat("a", 64), owner: gone, want: VerdictForeign,
		},
		"NoInstance":  {reason: "An instance without the provider instance label is not ours.", in: with(""), ours: "default", owner: gone, want: VerdictForeign},
		"EmptyOurs":   {reason: "An empty provider instance owns nothing.", in: with(""), ours: "", owner: gone, want: VerdictForeign},
		"UnownedPart": {reason: "A part without ownership (a volume whose domain is gone) is never collected: it may be another installation's.", in: Instance{State: commonv1alpha1.StateTerminated, CreatedAt: old.CreatedAt}, ours: "default", owner: gone, want: VerdictForeign},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Judge(tc.in, tc.ours, tc.owner, 10*time.Minute, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nJudge(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want == VerdictCollect, Collectable(tc.in, tc.ours, tc.owner, 10*time.Minute, now)); diff != "" {
				t.Errorf("%s\nCollectable(...) disagrees with Judge: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
