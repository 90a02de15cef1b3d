package proxyguest

import (
	"testing"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"

	"github.com/egressproxy/provider-egressproxy/internal/backend/gcp"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

func TestReportAll(t *testing.T) {
	s := gcpfake.NewTestServer(t)
	c, err := compute.NewInstancesRESTClient(t.Context(), s.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	item := func(k, v string) *computepb.Items {
		return &computepb.Items{Key: proto.String(k), Value: proto.String(v)}
	}
	insert := func(name string, items ...*computepb.Items) {
		op, err := c.Insert(t.Context(), &computepb.InsertInstanceRequest{Project: "p", Zone: "us-central1-a", InstanceResource: &computepb.Instance{
			Name:        proto.String(name),
			MachineType: proto.String("zones/us-central1-a/machineTypes/e2-small"),
			Disks: []*computepb.AttachedDisk{{Boot: proto.Bool(true), InitializeParams: &computepb.AttachedDiskInitializeParams{
				SourceImage: proto.String("projects/debian-cloud/global/images/family/debian-12"),
			}}},
			NetworkInterfaces: []*computepb.NetworkInterface{{Network: proto.String("global/networks/default")}},
			Metadata:          &computepb.Metadata{Items: items},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := op.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		for range 3 { // the fake boots a VM over a few observations
			_, _ = c.Get(t.Context(), &computepb.GetInstanceRequest{Project: "p", Zone: "us-central1-a", Instance: name})
		}
	}
	insert("proxy", item(gcp.MetadataConfigChecksum, "abc"), item(gcp.MetadataEnableGuestAttributes, "TRUE"))
	insert("other", item(gcp.MetadataEnableGuestAttributes, "TRUE"))
	now := time.Unix(1_800_000_000, 0)
	ReportAll(s, now)
	if v, _ := s.GuestAttribute("p", "us-central1-a", "proxy", gcp.GuestAttributePath); v != gcp.GuestReport(gcp.GuestServing, "abc", now, "") {
		t.Errorf("the proxy's simulated guest reported %q", v)
	}
	if v, _ := s.GuestAttribute("p", "us-central1-a", "proxy", gcp.GuestApplyPath); v != gcp.GuestReport(gcp.GuestApplied, gcp.AppliedConfig("abc", ""), now, "") {
		t.Errorf("the proxy's simulated watcher reported %q", v)
	}
	if v, _ := s.GuestAttribute("p", "us-central1-a", "proxy", gcp.GuestTrafficPath); v != (squid.Traffic{}).String() {
		t.Errorf("the proxy's simulated counters are %q", v)
	}
	id, _ := s.GuestAttribute("p", "us-central1-a", "proxy", gcp.GuestBootIDPath)
	ReportAll(s, now.Add(time.Second))
	if again, _ := s.GuestAttribute("p", "us-central1-a", "proxy", gcp.GuestBootIDPath); id == "" || again != id {
		t.Errorf("boot IDs %q then %q: want one, the same while the VM runs", id, again)
	}
	if v, ok := s.GuestAttribute("p", "us-central1-a", "other", gcp.GuestAttributePath); ok {
		t.Errorf("a VM without a proxy configuration got a report: %q", v)
	}
}
