/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package guestvm

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"github.com/kdomanski/iso9660"
	"google.golang.org/protobuf/proto"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

func TestSeed(t *testing.T) {
	const script = "#!/bin/bash\necho 'it ran'\n"
	iso, err := Seed("vm-1", "#cloud-config\n{}\n", VendorData(script))
	if err != nil {
		t.Fatal(err)
	}
	img, err := iso9660.OpenImage(bytes.NewReader(iso))
	if err != nil {
		t.Fatal(err)
	}
	if label, _ := img.Label(); label != "cidata" {
		t.Errorf("label %q, want cidata (NoCloud)", label)
	}
	root, err := img.RootDir()
	if err != nil {
		t.Fatal(err)
	}
	kids, err := root.GetChildren()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, k := range kids {
		b, _ := io.ReadAll(k.Reader())
		got[k.Name()] = string(b)
	}
	if diff := cmp.Diff("instance-id: vm-1\nlocal-hostname: vm-1\n", got["meta-data"]); diff != "" {
		t.Errorf("meta-data: -want, +got:\n%s", diff)
	}
	if got["user-data"] != "#cloud-config\n{}\n" {
		t.Errorf("user-data: %q, want the instance's", got["user-data"])
	}
	// The vendor-data installs the startup-script as it is, and names
	// the metadata server as GCE's images do.
	for _, want := range []string{
		base64.StdEncoding.EncodeToString([]byte(script)),
		MetadataAddr + " metadata.google.internal",
		"systemctl enable gce-startup-script.service",
	} {
		if !strings.Contains(got["vendor-data"], want) {
			t.Errorf("vendor-data lacks %q:\n%s", want, got["vendor-data"])
		}
	}
}

func TestDomain(t *testing.T) {
	x, err := Domain(Machine{Name: "gce-vm-1", Disk: "/p/d.qcow2", Seed: "/p/s.iso", Console: "/p/c.log", Network: "default", MAC: "52:54:00:00:00:01", MemoryMiB: 512}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`<name>gce-vm-1</name>`, `<mac address="52:54:00:00:00:01">`, `<source network="default">`,
		`<source file="/p/s.iso">`, `<target dev="vdb" bus="virtio">`, `<readonly>`, `<memory unit="MiB">512</memory>`,
	} {
		if !strings.Contains(x, want) {
			t.Errorf("domain XML lacks %s:\n%s", want, x)
		}
	}
}

func TestInstanceFields(t *testing.T) {
	cases := map[string]struct {
		reason            string
		inst              *computepb.Instance
		project, zone, ip string
		ok                bool
	}{
		"ExternalIP": {
			reason: "The external IP is the first access config's natIP; project and zone come from the selfLink.",
			inst: &computepb.Instance{
				SelfLink: proto.String("https://compute.googleapis.com/compute/v1/projects/p/zones/z-1/instances/vm"),
				NetworkInterfaces: []*computepb.NetworkInterface{{AccessConfigs: []*computepb.AccessConfig{
					{NatIP: proto.String("198.51.100.7")},
				}}},
			},
			project: "p", zone: "z-1", ip: "198.51.100.7", ok: true,
		},
		"NoExternalIP": {
			reason:  "An instance without an access config has no external IP to map.",
			inst:    &computepb.Instance{SelfLink: proto.String("x/projects/p/zones/z/instances/vm")},
			project: "p", zone: "z", ok: true,
		},
		"BadSelfLink": {
			reason: "A selfLink without a zone names no instance.",
			inst:   &computepb.Instance{SelfLink: proto.String("x/projects/p/global/firewalls/f")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			type fields struct {
				Project, Zone, IP string
				OK                bool
			}
			var got fields
			got.Project, got.Zone, got.OK = projectZone(tc.inst.GetSelfLink())
			got.IP = natIP(tc.inst)
			if diff := cmp.Diff(fields{tc.project, tc.zone, tc.ip, tc.ok}, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestNATRules has nft check the rules (-c: nothing is applied) in a
// network namespace of its own.
func TestNATRules(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "nft -c needs root")
	}
	testenv.LookPath(t, "nft", "nftables")
	testenv.LookPath(t, "unshare", "util-linux")
	cases := map[string]struct {
		reason   string
		external map[netip.Addr]netip.Addr
		want     []string
	}{
		"None": {
			reason: "Without guests the table maps nothing.",
		},
		"Two": {
			reason:   "Each external IP maps to its guest's lease.",
			external: map[netip.Addr]netip.Addr{netip.MustParseAddr("203.0.113.2"): netip.MustParseAddr("192.168.150.25"), netip.MustParseAddr("198.51.100.9"): netip.MustParseAddr("192.168.150.3")},
			want:     []string{"elements = { 198.51.100.9 : 192.168.150.3, 203.0.113.2 : 192.168.150.25 }"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rules := natRules(tc.external)
			c := exec.Command("unshare", "-n", "nft", "-c", "-f", "-")
			c.Stdin = strings.NewReader(rules)
			if out, err := c.CombinedOutput(); err != nil {
				t.Errorf("%s\nnft -c: %v\n%s\n%s", tc.reason, err, out, rules)
			}
			for _, w := range tc.want {
				if !strings.Contains(rules, w) {
					t.Errorf("%s\nthe rules lack %q:\n%s", tc.reason, w, rules)
				}
			}
		})
	}
}
