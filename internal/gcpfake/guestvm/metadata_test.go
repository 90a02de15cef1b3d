/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package guestvm

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
)

// TestServeGuest: one metadata listener answers each guest, known by its
// source address, for its own instance, and a guest whose instance was
// replaced by one of the same name (a spec change) for none.
func TestServeGuest(t *testing.T) {
	const project, zone = "p", "us-central1-a"
	s := gcpfake.NewTestServer(t)
	c, err := compute.NewInstancesRESTClient(t.Context(), s.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	insert := func(name string) *computepb.Instance {
		op, err := c.Insert(t.Context(), &computepb.InsertInstanceRequest{Project: project, Zone: zone, InstanceResource: &computepb.Instance{
			Name:        proto.String(name),
			MachineType: proto.String("zones/" + zone + "/machineTypes/e2-small"),
			Disks: []*computepb.AttachedDisk{{Boot: proto.Bool(true), InitializeParams: &computepb.AttachedDiskInitializeParams{
				SourceImage: proto.String("projects/debian-cloud/global/images/family/debian-12"),
			}}},
			NetworkInterfaces: []*computepb.NetworkInterface{{Network: proto.String("global/networks/default")}},
			Metadata:          &computepb.Metadata{Items: []*computepb.Items{{Key: proto.String("enable-guest-attributes"), Value: proto.String("TRUE")}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := op.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		inst, _ := s.Instance(project, zone, name)
		return inst
	}
	a, b := insert("vm-a"), insert("vm-b")
	r := &Runner{s: s, guests: map[uint64]*guest{}}
	for _, g := range []struct {
		inst *computepb.Instance
		ip   string
	}{{a, "192.168.150.10"}, {b, "192.168.150.11"}, {&computepb.Instance{Id: proto.Uint64(1), Name: proto.String("vm-a")}, "192.168.150.12"}} {
		id := g.inst.GetId()
		r.guests[id] = &guest{id: id, name: g.inst.GetName(), ip: netip.MustParseAddr(g.ip), metadata: r.metadataServer(id, project, zone, g.inst.GetName())}
	}

	type answer struct {
		Code int
		Body string
	}
	cases := map[string]struct {
		reason string
		from   string
		want   answer
	}{
		"GuestA": {
			reason: "The guest of vm-a is answered for vm-a.",
			from:   "192.168.150.10",
			want:   answer{http.StatusOK, "vm-a"},
		},
		"GuestB": {
			reason: "The guest of vm-b is answered for vm-b.",
			from:   "192.168.150.11",
			want:   answer{http.StatusOK, "vm-b"},
		},
		"ReplacedInstance": {
			reason: "The guest of an instance that is gone is not answered for the new one of the same name.",
			from:   "192.168.150.12",
			want:   answer{http.StatusNotFound, "Not found.\n"},
		},
		"Stranger": {
			reason: "An address that is no guest's gets nothing.",
			from:   "192.168.150.99",
			want:   answer{http.StatusNotFound, "Not found.\n"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "http://metadata.google.internal/computeMetadata/v1/instance/name", nil)
			req.Header.Set("Metadata-Flavor", "Google")
			req.RemoteAddr = tc.from + ":40000"
			w := httptest.NewRecorder()
			r.serveGuest(w, req)
			if diff := cmp.Diff(tc.want, answer{w.Code, w.Body.String()}); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
