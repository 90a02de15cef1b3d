/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package backend

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// rfc1035 is the strictest name syntax of any backend (GCE, Kubernetes Services).
var rfc1035 = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

func TestName(t *testing.T) {
	uid := "0b3c1e0e-5f3a-4c1e-9a57-1a2b3c4d5e6f"
	cases := map[string]struct {
		reason string
		owner  Owner
		max    int
		want   string
	}{
		"Short": {
			reason: "A short name keeps namespace and name readable, plus a hash of the UID.",
			owner:  Owner{UID: "u1", Namespace: "team-a", Name: "proxy"},
			max:    63,
			want:   "egp-team-a-proxy-" + Name(Owner{UID: "u1"}, 63)[4:],
		},
		"Sanitized": {
			reason: "Dots and upper case become a valid label.",
			owner:  Owner{UID: "u1", Namespace: "Team.A", Name: "my.proxy"},
			max:    63,
			want:   "egp-team-a-my-proxy-" + Name(Owner{UID: "u1"}, 63)[4:],
		},
		"Truncated": {
			reason: "A long name is cut so the whole fits the limit, keeping the hash.",
			owner:  Owner{UID: "u1", Namespace: strings.Repeat("n", 63), Name: strings.Repeat("p", 63)},
			max:    63,
			want:   "egp-" + strings.Repeat("n", 50) + "-" + Name(Owner{UID: "u1"}, 63)[4:],
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Name(tc.owner, tc.max)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nName(...): -want, +got:\n%s", tc.reason, diff)
			}
			if len(got) > tc.max || !rfc1035.MatchString(got) {
				t.Errorf("%s\nName(...) = %q: longer than %d or not an RFC 1035 label", tc.reason, got, tc.max)
			}
		})
	}
	a := Name(Owner{UID: "u1", Namespace: "team-a", Name: "proxy"}, 63)
	if a != Name(Owner{UID: "u1", Namespace: "team-a", Name: "proxy"}, 63) {
		t.Errorf("Name must be deterministic")
	}
	if a == Name(Owner{UID: "u2", Namespace: "team-a", Name: "proxy"}, 63) {
		t.Errorf("a re-created resource (new UID) must get a new name, so it never adopts its predecessor's instance")
	}
	if got := Name(Owner{UID: "u1", Namespace: "team-a", Name: "proxy"}, 63); !strings.HasPrefix(got, "egp-") || len(uid) == 0 {
		t.Errorf("Name must start with egp-: %q", got)
	}
}

func TestParseID(t *testing.T) {
	type want struct {
		parts []string
		class Class
	}
	cases := map[string]struct {
		reason string
		id     string
		want   want
	}{
		"RoundTrip":   {reason: "FormatID's output parses back.", id: FormatID("gce", "p", "z", "n"), want: want{parts: []string{"p", "z", "n"}}},
		"WrongScheme": {reason: "Another backend's ID is Permanent.", id: "libvirt://h/n", want: want{class: ClassPermanent}},
		"TooFew":      {reason: "Missing parts are Permanent.", id: "gce://p/n", want: want{class: ClassPermanent}},
		"Empty":       {reason: "Empty parts are Permanent.", id: "gce://p//n", want: want{class: ClassPermanent}},
		"Garbage":     {reason: "Garbage is Permanent, not a panic.", id: "\x00", want: want{class: ClassPermanent}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			parts, err := ParseID(tc.id, "gce", "project", "zone", "name")
			if diff := cmp.Diff(tc.want.parts, parts, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nParseID(...): -want parts, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.class, ClassOf(err)); diff != "" {
				t.Errorf("%s\nParseID(...): -want class, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
