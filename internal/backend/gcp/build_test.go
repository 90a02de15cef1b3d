/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"strings"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

func TestResolve(t *testing.T) {
	cases := map[string]struct {
		reason string
		d      Desired
		want   spec
		err    error
	}{
		"Defaults": {
			reason: "Unset parameters take the API's defaults; the instance name is the firewall target tag.",
			d:      desired(func(d *Desired) { d.Params.Labels = nil; d.Proxy.Port = 0 }),
			want: spec{
				name: testName, zone: testZone, region: testRegion, machineType: DefaultMachineType, image: DefaultImage,
				network: DefaultNetwork, tags: []string{testName}, labels: map[string]string{}, addressName: testName, port: 3128,
			},
		},
		"Everything": {
			reason: "Given parameters win; a named address is the user's.",
			d: desired(func(d *Desired) {
				d.Params = v1alpha1.GCPProxyParameters{
					Zone: "europe-west1-b", MachineType: "n2-standard-2", Image: "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64",
					Network: "vpc", Subnetwork: proto.String("egress"), NetworkTags: []string{"zz", "aa", testName},
					Labels: map[string]v1alpha1.LabelValue{"env": "prod"}, ServiceAccountEmail: proto.String("sa@p.iam.gserviceaccount.com"),
					Address: &v1alpha1.GCPAddress{Name: proto.String("my-ip")}, RetainAddressOnDelete: true,
				}
			}),
			want: spec{
				name: testName, zone: "europe-west1-b", region: "europe-west1", machineType: "n2-standard-2",
				image: "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64", network: "vpc", subnetwork: "egress",
				tags: []string{"aa", testName, "zz"}, labels: map[string]string{"env": "prod"}, sa: "sa@p.iam.gserviceaccount.com",
				addressName: "my-ip", userAddress: true, retain: true, port: 3128,
			},
		},
		"BadZone": {
			reason: "A zone that could change a URL path is refused.",
			d:      desired(func(d *Desired) { d.Params.Zone = "us-central1-a/../x" }),
			err:    backend.Permanent(errors.Errorf(errFmtZone, "us-central1-a/../x")),
		},
		"BadName": {
			reason: "An instance name that is not an RFC 1035 label is refused.",
			d:      desired(func(d *Desired) { d.Name = "Bad_Name" }),
			err:    backend.Permanent(errors.Errorf(errFmtName, "instance name", "Bad_Name")),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := resolve(tc.d)
			if diff := cmp.Diff(tc.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\nresolve error: -want +got:\n%s", tc.reason, diff)
			}
			if tc.err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(spec{})); diff != "" {
				t.Errorf("%s\nresolve: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestBuildInstance(t *testing.T) {
	s, err := resolve(desired(func(d *Desired) {
		d.Params.Subnetwork = proto.String("egress")
		d.Params.ServiceAccountEmail = proto.String("sa@p.iam.gserviceaccount.com")
	}))
	if err != nil {
		t.Fatal(err)
	}
	md := &computepb.Metadata{Items: []*computepb.Items{{Key: proto.String(MetadataConfigChecksum), Value: proto.String("sum")}}}
	want := &computepb.Instance{
		Name:        proto.String(testName),
		Description: proto.String("Egress proxy team-a/web, managed by provider-egressproxy"),
		MachineType: proto.String("zones/us-central1-a/machineTypes/e2-small"),
		Disks: []*computepb.AttachedDisk{{Boot: proto.Bool(true), AutoDelete: proto.Bool(true), InitializeParams: &computepb.AttachedDiskInitializeParams{
			SourceImage: proto.String(DefaultImage), DiskSizeGb: proto.Int64(10),
		}}},
		NetworkInterfaces: []*computepb.NetworkInterface{{
			Network:       proto.String("projects/test-project/global/networks/default"),
			Subnetwork:    proto.String("projects/test-project/regions/us-central1/subnetworks/egress"),
			AccessConfigs: []*computepb.AccessConfig{{Name: proto.String("External NAT"), Type: proto.String("ONE_TO_ONE_NAT"), NatIP: proto.String("203.0.113.9")}},
		}},
		Tags: &computepb.Tags{Items: []string{testName}},
		Labels: map[string]string{
			"team": "a", "egressproxy-managed-by": "provider-egressproxy", "egressproxy-owner-uid": testUID,
			"egressproxy-provider-instance": "default", "egressproxy-owner-namespace": "team-a", "egressproxy-owner-name": "web",
		},
		Metadata: md,
		ServiceAccounts: []*computepb.ServiceAccount{{Email: proto.String("sa@p.iam.gserviceaccount.com"), Scopes: []string{
			// Never cloud-platform: whoever controls the proxy could use the token.
			"https://www.googleapis.com/auth/logging.write", "https://www.googleapis.com/auth/monitoring.write",
		}}},
	}
	got := buildInstance(testProject, s, ownership(testUID), "203.0.113.9", md)
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("buildInstance: -want +got:\n%s", diff)
	}
}

func TestInstanceDigest(t *testing.T) {
	d := desired()
	s, _ := resolve(d)
	build := func(d Desired) *computepb.Instance {
		t.Helper()
		pc, err := renderConfig(squid.NewVerifier(), d, nil)
		if err != nil {
			t.Fatal(err)
		}
		md, err := buildMetadata(pc)
		if err != nil {
			t.Fatal(err)
		}
		return buildInstance(testProject, s, d.Ownership, "203.0.113.9", md)
	}
	a, b := build(d), build(d)
	if metadataValue(a, MetadataHtpasswd) == metadataValue(b, MetadataHtpasswd) {
		t.Fatalf("two htpasswd files must differ by their salt")
	}
	if instanceDigest(a) != instanceDigest(b) {
		t.Errorf("the digest must not depend on the htpasswd salt, or a request ID changes every reconcile")
	}
	d.Proxy.AllowedDestinations = []string{"other.example.com"}
	if instanceDigest(a) == instanceDigest(build(d)) {
		t.Errorf("the digest must change with the proxy configuration")
	}
}

func TestBuildFirewall(t *testing.T) {
	s := spec{name: testName, network: "default", port: 8080}
	cases := map[string]struct {
		reason string
		cidrs  []string
		want   []string
		err    error
	}{
		"Canonical": {
			reason: "Ranges are canonical, sorted and unique; IPv6 ranges are left out.",
			cidrs:  []string{"192.0.2.7/24", "10.0.0.0/8", "fd00::/8", "10.0.0.0/8", "198.51.100.1"},
			want:   []string{"10.0.0.0/8", "192.0.2.0/24", "198.51.100.1/32"},
		},
		"OnlyIPv6": {
			reason: "A rule without source ranges would admit everyone: refuse.",
			cidrs:  []string{"fd00::/8"},
			err:    backend.Permanent(errors.New(errNoIPv4CIDR)),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fw, err := buildFirewall(testProject, s, tc.cidrs, ownership(testUID))
			if diff := cmp.Diff(tc.err, err, test.EquateErrors()); diff != "" {
				t.Fatalf("%s\nbuildFirewall error: -want +got:\n%s", tc.reason, diff)
			}
			if tc.err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, fw.GetSourceRanges()); diff != "" {
				t.Errorf("%s\nsource ranges: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(`[tcp:8080]`, ruleString(fw.GetAllowed())); diff != "" {
				t.Errorf("%s\nallowed: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff([]string{testName}, fw.GetTargetTags()); diff != "" {
				t.Errorf("%s\ntarget tags: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestOwnershipMarks(t *testing.T) {
	o := backend.Ownership{Owner: backend.Owner{UID: testUID, Namespace: "team-a", Name: "web.v2"}, ProviderInstance: "Prod.EU"}
	l := ownershipLabels(o)
	if l["egressproxy-owner-name"] != "web-v2" || l["egressproxy-provider-instance"] != "prod-eu" {
		t.Errorf("label values must be GCE-safe, got %v", l)
	}
	if !ownedBy(l, o) {
		t.Errorf("labels made from o must read back as owned by o")
	}
	other := o
	other.ProviderInstance = "other"
	if ownedBy(l, other) {
		t.Errorf("another provider instance must not own them")
	}
	desc := firewallDescription(o)
	if !firewallOwnedBy(desc, o) || firewallOwnedBy(desc, other) || firewallOwnedBy("hand-made rule", o) {
		t.Errorf("firewall ownership must read back from %q only for its owner", desc)
	}
	if !strings.HasSuffix(desc, "(owner-uid="+testUID+" provider-instance=prod-eu)") {
		t.Errorf("description = %q", desc)
	}
}

func TestRequestID(t *testing.T) {
	a := requestID("p", "z", "n", "instances.insert", "1")
	u, err := uuid.Parse(a)
	if err != nil || u == uuid.Nil || u.Version() != 5 || u.Variant() != uuid.RFC4122 {
		t.Fatalf("requestID = %q (%v): want a non-zero RFC 4122 version 5 UUID", a, err)
	}
	if a != requestID("p", "z", "n", "instances.insert", "1") {
		t.Errorf("requestID must be deterministic")
	}
	if a == requestID("p", "z", "n", "instances.delete", "1") || a == requestID("p", "zn", "", "instances.insert", "1") {
		t.Errorf("requestID must differ for other parts")
	}
	now := newClock().now() // 10:00:00, the start of a window
	if epoch(now, DefaultRetryInterval) != epoch(now.Add(DefaultRetryInterval-1), DefaultRetryInterval) {
		t.Errorf("a window must last DefaultRetryInterval")
	}
	if epoch(now, DefaultRetryInterval) == epoch(now.Add(DefaultRetryInterval), DefaultRetryInterval) {
		t.Errorf("the next window must have another epoch")
	}
}

// TestHtpasswdCost: a generated password is hashed at bcrypt.MinCost, as
// backend.HtpasswdCost says (at the default cost it was 85% of the
// provider's CPU while 200 new GCP proxies converged), a person's password
// at the default cost.
func TestHtpasswdCost(t *testing.T) {
	cases := map[string]struct {
		reason    string
		generated bool
		want      int
	}{
		"Generated": {reason: "A generated password gets the lowest cost.", generated: true, want: bcrypt.MinCost},
		"Given":     {reason: "A password a person chose keeps the default cost.", want: bcrypt.DefaultCost},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := desired(func(d *Desired) { d.Credentials.Generated = tc.generated })
			pc, err := renderConfig(squid.NewVerifier(), d, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, hash, _ := strings.Cut(strings.TrimSpace(string(pc.htpasswd)), ":")
			got, err := bcrypt.Cost([]byte(hash))
			if err != nil {
				t.Fatalf("not a bcrypt hash: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nbcrypt cost: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
