package gcpfake

import (
	"context"
	"testing"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"
)

const (
	testProject = "test-project"
	testZone    = "us-central1-a"
	testRegion  = "us-central1"
)

// clients are the real compute REST clients, pointed at a fake.
type clients struct {
	inst *compute.InstancesClient
	addr *compute.AddressesClient
	fw   *compute.FirewallsClient
	zop  *compute.ZoneOperationsClient
	rop  *compute.RegionOperationsClient
	gop  *compute.GlobalOperationsClient
}

func newClients(t *testing.T, opts ...option.ClientOption) *clients {
	t.Helper()
	ctx := context.Background()
	c := &clients{}
	var err error
	must := func(e error) {
		t.Helper()
		if e != nil {
			t.Fatalf("cannot create a compute client: %v", e)
		}
	}
	c.inst, err = compute.NewInstancesRESTClient(ctx, opts...)
	must(err)
	c.addr, err = compute.NewAddressesRESTClient(ctx, opts...)
	must(err)
	c.fw, err = compute.NewFirewallsRESTClient(ctx, opts...)
	must(err)
	c.zop, err = compute.NewZoneOperationsRESTClient(ctx, opts...)
	must(err)
	c.rop, err = compute.NewRegionOperationsRESTClient(ctx, opts...)
	must(err)
	c.gop, err = compute.NewGlobalOperationsRESTClient(ctx, opts...)
	must(err)
	t.Cleanup(func() {
		for _, cl := range []interface{ Close() error }{c.inst, c.addr, c.fw, c.zop, c.rop, c.gop} {
			_ = cl.Close()
		}
	})
	return c
}

// setup starts a fake and the clients that talk to it.
func setup(t *testing.T, opts ...Option) (*Server, *clients) {
	t.Helper()
	s := NewTestServer(t, opts...)
	return s, newClients(t, s.ClientOptions()...)
}

// ctxT is a context bounded well below the test timeout.
func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type instanceModifier func(*computepb.Instance)

func withLabels(l map[string]string) instanceModifier {
	return func(i *computepb.Instance) { i.Labels = l }
}

func withNatIP(ip string) instanceModifier {
	return func(i *computepb.Instance) { i.NetworkInterfaces[0].AccessConfigs[0].NatIP = proto.String(ip) }
}

// instance builds what a backend would send: a boot disk from an image, the
// default network with one access config, metadata, tags and labels.
func instance(name string, mods ...instanceModifier) *computepb.Instance {
	i := &computepb.Instance{
		Name:        proto.String(name),
		MachineType: proto.String("zones/" + testZone + "/machineTypes/e2-small"),
		Disks: []*computepb.AttachedDisk{{
			Boot:       proto.Bool(true),
			AutoDelete: proto.Bool(true),
			InitializeParams: &computepb.AttachedDiskInitializeParams{
				SourceImage: proto.String("projects/debian-cloud/global/images/family/debian-12"),
			},
		}},
		NetworkInterfaces: []*computepb.NetworkInterface{{
			Network:       proto.String("global/networks/default"),
			AccessConfigs: []*computepb.AccessConfig{{Name: proto.String("External NAT")}},
		}},
		Metadata: &computepb.Metadata{Items: []*computepb.Items{
			{Key: proto.String("startup-script"), Value: proto.String("#!/bin/sh\necho hi")},
			{Key: proto.String("user-data"), Value: proto.String("#cloud-config\n")},
		}},
		Tags:   &computepb.Tags{Items: []string{"egress-proxy"}},
		Labels: map[string]string{"managed-by": "egressproxy"},
	}
	for _, m := range mods {
		m(i)
	}
	return i
}

func insertInstance(ctx context.Context, t *testing.T, c *clients, zone string, in *computepb.Instance) *compute.Operation {
	t.Helper()
	op, err := c.inst.Insert(ctx, &computepb.InsertInstanceRequest{Project: testProject, Zone: zone, InstanceResource: in})
	if err != nil {
		t.Fatalf("Insert(%s): %v", in.GetName(), err)
	}
	return op
}

func mustWait(ctx context.Context, t *testing.T, op *compute.Operation) {
	t.Helper()
	if err := op.Wait(ctx); err != nil {
		t.Fatalf("Wait(%s): %v", op.Name(), err)
	}
	if e := op.Proto().GetError(); e != nil {
		t.Fatalf("operation %s failed: %v", op.Name(), e)
	}
}
