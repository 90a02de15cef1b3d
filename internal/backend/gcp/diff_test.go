/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"encoding/base64"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

func TestInstanceDiff(t *testing.T) {
	htpasswd, err := squid.Htpasswd("team-a", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	conf := []byte("http_port 3128\n")
	sum := squid.Checksum(conf)
	want := wantInstance{
		MachineType: "e2-small", Labels: map[string]string{"team": "a"}, Tags: []string{"egp-x"},
		NatIP: "203.0.113.9", ConfigChecksum: sum, Port: 3128, GuestVersion: "2", Credentials: backend.Credentials{Username: "team-a", Password: "s3cret"},
	}
	instance := func(mods ...func(*computepb.Instance)) *computepb.Instance {
		i := &computepb.Instance{
			MachineType: proto.String("https://www.googleapis.com/compute/v1/projects/p/zones/z/machineTypes/e2-small"),
			Labels:      map[string]string{"team": "a", "goog-ops-agent-policy": "v2"},
			Tags:        &computepb.Tags{Items: []string{"egp-x"}},
			NetworkInterfaces: []*computepb.NetworkInterface{{
				NetworkIP: proto.String("10.128.0.2"), AccessConfigs: []*computepb.AccessConfig{{NatIP: proto.String("203.0.113.9")}},
			}},
			Metadata: &computepb.Metadata{Items: []*computepb.Items{
				{Key: proto.String(MetadataUserData), Value: proto.String("#cloud-config")},
				{Key: proto.String(MetadataStartupScript), Value: proto.String("#!/bin/bash")},
				{Key: proto.String(MetadataConfigChecksum), Value: proto.String(sum)},
				{Key: proto.String(MetadataHtpasswd), Value: proto.String(string(htpasswd))},
				{Key: proto.String(MetadataSquidConf), Value: proto.String(base64.StdEncoding.EncodeToString(conf))},
				{Key: proto.String(MetadataPort), Value: proto.String("3128")},
				{Key: proto.String(MetadataGuestVersion), Value: proto.String("2")},
			}},
		}
		for _, m := range mods {
			m(i)
		}
		return i
	}
	cases := map[string]struct {
		reason string
		want   wantInstance
		got    *computepb.Instance
		diff   []string
	}{
		"Same": {
			reason: "Labels Google adds are not drift.",
			want:   want, got: instance(),
		},
		"NoAddress": {
			reason: "A missing address (empty NatIP) is reported by the address check, not here.",
			want:   func() wantInstance { w := want; w.NatIP = ""; return w }(),
			got:    instance(),
		},
		"OldGuest": {
			reason: "A VM made before the metadata guard existed is replaced, so it gets the guard.",
			want:   want,
			got: instance(func(i *computepb.Instance) {
				i.Metadata.Items = i.Metadata.Items[:6]
			}),
			diff: []string{`metadata egressproxy-guest-version is "", want "2"`},
		},
		"BroadScopes": {
			reason: "An instance made with the cloud-platform scope (before scopes were narrowed) is replaced by one with the narrow scopes.",
			want: func() wantInstance {
				w := want
				w.ServiceAccount, w.Scopes = "sa@p", proxyScopes()
				return w
			}(),
			got: instance(func(i *computepb.Instance) {
				i.ServiceAccounts = []*computepb.ServiceAccount{{Email: proto.String("sa@p"), Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"}}}
			}),
			diff: []string{
				"service account scopes are [https://www.googleapis.com/auth/cloud-platform], " +
					"want [https://www.googleapis.com/auth/logging.write https://www.googleapis.com/auth/monitoring.write]",
			},
		},
		"NarrowScopes": {
			reason: "The narrow scopes, in any order, are no drift.",
			want: func() wantInstance {
				w := want
				w.ServiceAccount, w.Scopes = "sa@p", proxyScopes()
				return w
			}(),
			got: instance(func(i *computepb.Instance) {
				i.ServiceAccounts = []*computepb.ServiceAccount{{Email: proto.String("sa@p"), Scopes: []string{
					"https://www.googleapis.com/auth/monitoring.write", "https://www.googleapis.com/auth/logging.write",
				}}}
			}),
		},
		"Everything": {
			reason: "Each difference is named.",
			want:   want,
			got: instance(func(i *computepb.Instance) {
				i.MachineType = proto.String("zones/z/machineTypes/e2-medium")
				i.Labels = map[string]string{"team": "b", "extra": "x"}
				i.Tags.Items = []string{"egp-x", "open"}
				i.ServiceAccounts = []*computepb.ServiceAccount{{Email: proto.String("sa@p"), Scopes: []string{"s"}}}
				i.NetworkInterfaces[0].AccessConfigs[0].NatIP = proto.String("198.51.100.1")
				i.Metadata.Items = i.Metadata.Items[2:3]
				i.Metadata.Items[0].Value = proto.String("old")
			}),
			diff: []string{
				"machine type is e2-medium, want e2-small",
				`service account is "sa@p", want ""`,
				"service account scopes are [s], want []",
				`external IP is "198.51.100.1", want the static address 203.0.113.9`,
				`metadata egressproxy-guest-version is "", want "2"`,
				"metadata user-data is missing",
				"metadata startup-script is missing",
				`label team is "b", want "a"`,
				"label extra is not wanted",
				"network tags are [egp-x open], want [egp-x]",
				`metadata egressproxy-config-checksum is "old", want "` + sum + `"`,
				"metadata egressproxy-squid-conf is not the rendered configuration",
				`metadata egressproxy-port is "", want "3128"`,
				"metadata egressproxy-htpasswd does not accept the current credentials",
			},
		},
		"OtherConf": {
			reason: "A configuration that is not the one the checksum names is drift, applied live.",
			want:   want,
			got: instance(func(i *computepb.Instance) {
				i.Metadata.Items[4].Value = proto.String(base64.StdEncoding.EncodeToString([]byte("http_port 3129\n")))
			}),
			diff: []string{"metadata egressproxy-squid-conf is not the rendered configuration"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.diff, instanceDiff(squid.NewVerifier(), tc.want, tc.got)); diff != "" {
				t.Errorf("%s\ninstanceDiff: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestReplaceDiff: only what a running VM cannot take replaces it; labels
// and network tags are set on it (Update: setLabels, setTags).
func TestReplaceDiff(t *testing.T) {
	want := wantInstance{
		MachineType: "e2-small", Labels: map[string]string{"team": "a", "egressproxy-owner-uid": "u"}, Tags: []string{"egp-x"},
		ServiceAccount: "sa@p", Scopes: proxyScopes(), NatIP: "203.0.113.9", GuestVersion: "2",
	}
	instance := func(mods ...func(*computepb.Instance)) *computepb.Instance {
		i := &computepb.Instance{
			MachineType:     proto.String("zones/z/machineTypes/e2-small"),
			Labels:          map[string]string{"team": "a", "egressproxy-owner-uid": "u"},
			Tags:            &computepb.Tags{Items: []string{"egp-x"}},
			ServiceAccounts: []*computepb.ServiceAccount{{Email: proto.String("sa@p"), Scopes: proxyScopes()}},
			NetworkInterfaces: []*computepb.NetworkInterface{{
				AccessConfigs: []*computepb.AccessConfig{{NatIP: proto.String("203.0.113.9")}},
			}},
			Metadata: &computepb.Metadata{Items: []*computepb.Items{
				{Key: proto.String(MetadataUserData), Value: proto.String("#cloud-config")},
				{Key: proto.String(MetadataStartupScript), Value: proto.String("#!/bin/bash")},
				{Key: proto.String(MetadataGuestVersion), Value: proto.String("2")},
			}},
		}
		for _, m := range mods {
			m(i)
		}
		return i
	}
	type diffs struct {
		Replace, Labels, Tags []string
	}
	cases := map[string]struct {
		reason string
		got    *computepb.Instance
		want   diffs
	}{
		"Same": {reason: "Nothing to do.", got: instance()},
		"Labels": {
			reason: "New user labels are set on the running VM.",
			got:    instance(func(i *computepb.Instance) { i.Labels["team"] = "b"; i.Labels["old"] = "x" }),
			want:   diffs{Labels: []string{`label team is "b", want "a"`, "label old is not wanted"}},
		},
		"OwnershipLabelLost": {
			reason: "An ownership label removed behind the provider's back is set again, not a reason to replace.",
			got:    instance(func(i *computepb.Instance) { delete(i.Labels, "egressproxy-owner-uid") }),
			want:   diffs{Labels: []string{`label egressproxy-owner-uid is "", want "u"`}},
		},
		"Tags": {
			reason: "New network tags are set on the running VM; their order does not matter.",
			got:    instance(func(i *computepb.Instance) { i.Tags.Items = []string{"open", "egp-x"} }),
			want:   diffs{Tags: []string{"network tags are [egp-x open], want [egp-x]"}},
		},
		"MachineType": {
			reason: "A new machine type needs a new VM.",
			got:    instance(func(i *computepb.Instance) { i.MachineType = proto.String("zones/z/machineTypes/e2-medium") }),
			want:   diffs{Replace: []string{"machine type is e2-medium, want e2-small"}},
		},
		"ServiceAccount": {
			reason: "Another service account needs a new VM.",
			got:    instance(func(i *computepb.Instance) { i.ServiceAccounts[0].Email = proto.String("other@p") }),
			want:   diffs{Replace: []string{`service account is "other@p", want "sa@p"`}},
		},
		"GuestVersion": {
			reason: "A new guest needs a new VM.",
			got:    instance(func(i *computepb.Instance) { i.Metadata.Items[2].Value = proto.String("1") }),
			want:   diffs{Replace: []string{`metadata egressproxy-guest-version is "1", want "2"`}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := diffs{
				Replace: replaceDiff(want, tc.got),
				Labels:  labelDiff(want.Labels, tc.got.GetLabels()),
				Tags:    tagDiff(want.Tags, tc.got.GetTags().GetItems()),
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestLabelsToSet(t *testing.T) {
	cases := map[string]struct {
		reason    string
		want, got map[string]string
		set       map[string]string
	}{
		"Replace": {
			reason: "The user's and the ownership labels replace the others.",
			want:   map[string]string{"team": "b", "egressproxy-owner-uid": "u"},
			got:    map[string]string{"team": "a", "old": "x", "egressproxy-owner-uid": "u"},
			set:    map[string]string{"team": "b", "egressproxy-owner-uid": "u"},
		},
		"KeepGoogle": {
			reason: "Labels Google added stay: they are not ours to remove.",
			want:   map[string]string{"team": "b"},
			got:    map[string]string{"team": "a", "goog-ops-agent-policy": "v2"},
			set:    map[string]string{"team": "b", "goog-ops-agent-policy": "v2"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.set, labelsToSet(tc.want, tc.got)); diff != "" {
				t.Errorf("%s\nlabelsToSet: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestFirewallDiff(t *testing.T) {
	want, err := buildFirewall("p", spec{name: "egp-x", network: "default", port: 3128}, []string{"10.0.0.0/8"}, ownership(testUID))
	if err != nil {
		t.Fatal(err)
	}
	got := func(mods ...func(*computepb.Firewall)) *computepb.Firewall {
		f := proto.CloneOf(want)
		f.Network = proto.String("https://www.googleapis.com/compute/v1/projects/p/global/networks/default")
		f.SourceRanges = []string{"10.1.2.3/8"}
		for _, m := range mods {
			m(f)
		}
		return f
	}
	cases := map[string]struct {
		reason string
		got    *computepb.Firewall
		diff   []string
	}{
		"Same": {reason: "Links and host bits do not matter.", got: got()},
		"Opened": {
			reason: "Everything that widens who may connect is drift.",
			got: got(func(f *computepb.Firewall) {
				f.SourceRanges = []string{"0.0.0.0/0"}
				f.SourceTags = []string{"any"}
				f.Allowed = []*computepb.Allowed{{IPProtocol: proto.String("all")}}
				f.TargetTags = nil
				f.Disabled = proto.Bool(true)
			}),
			diff: []string{
				"firewall source ranges are [0.0.0.0/0], want [10.0.0.0/8]",
				"firewall admits source tags or service accounts",
				"firewall allows [all:], want [tcp:3128]",
				"firewall targets tags [], want [egp-x]",
				"firewall is disabled",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.diff, firewallDiff(want, tc.got)); diff != "" {
				t.Errorf("%s\nfirewallDiff: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestInstanceState(t *testing.T) {
	cases := map[string]string{
		"PROVISIONING": "Pending", "STAGING": "Pending", "RUNNING": "Running", "STOPPING": "Stopped",
		"STOPPED": "Stopped", "SUSPENDING": "Stopped", "SUSPENDED": "Stopped", "TERMINATED": "Terminated", "NEW": "Unknown",
	}
	for status, want := range cases {
		if got, _ := instanceState(status); string(got) != want {
			t.Errorf("instanceState(%s) = %s, want %s", status, got, want)
		}
	}
}
