package gcpfake

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
)

func TestInsertWaitGetFillsServerFields(t *testing.T) {
	s, c := setup(t)
	ctx := ctxT(t)
	op := insertInstance(ctx, t, c, testZone, instance("proxy-1"))
	if got := op.Proto().GetStatus(); got == computepb.Operation_DONE {
		t.Errorf("Insert: operation status = %v, want not DONE before the first poll", got)
	}
	mustWait(ctx, t, op)

	got, err := c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: testZone, Instance: "proxy-1"})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.GetStatus() != "RUNNING" {
		t.Errorf("Get: status = %q, want RUNNING", got.GetStatus())
	}
	if got.GetId() == 0 {
		t.Error("Get: id is 0")
	}
	if _, err := time.Parse(time.RFC3339, got.GetCreationTimestamp()); err != nil {
		t.Errorf("Get: creationTimestamp %q is not RFC 3339: %v", got.GetCreationTimestamp(), err)
	}
	link := linkBase + "projects/test-project/zones/us-central1-a/instances/proxy-1"
	nic := got.GetNetworkInterfaces()[0]
	checks := map[string]struct{ got, want any }{
		"selfLink":    {got.GetSelfLink(), link},
		"zone":        {got.GetZone(), linkBase + "projects/test-project/zones/us-central1-a"},
		"machineType": {got.GetMachineType(), linkBase + "projects/test-project/zones/us-central1-a/machineTypes/e2-small"},
		"network":     {nic.GetNetwork(), linkBase + "projects/test-project/global/networks/default"},
		"networkIP":   {inRange(nic.GetNetworkIP(), internalRange), true},
		"natIP":       {inRange(nic.GetAccessConfigs()[0].GetNatIP(), ephemeralRange), true},
		"disk source": {got.GetDisks()[0].GetSource(), linkBase + "projects/test-project/zones/us-central1-a/disks/proxy-1"},
		"metadata.fp": {got.GetMetadata().GetFingerprint() != "", true},
		"labelFp":     {got.GetLabelFingerprint() != "", true},
		"tags.fp":     {got.GetTags().GetFingerprint() != "", true},
		"labels":      {got.GetLabels()["managed-by"], "egressproxy"},
		"op target":   {op.Proto().GetTargetLink(), link},
		"op targetId": {op.Proto().GetTargetId(), got.GetId()},
		"op type":     {op.Proto().GetOperationType(), "insert"},
		"op zone":     {op.Proto().GetZone(), linkBase + "projects/test-project/zones/us-central1-a"},
		"insertCalls": {s.Calls(CallInstancesInsert), 1},
	}
	for name, ch := range checks {
		if diff := cmp.Diff(ch.want, ch.got); diff != "" {
			t.Errorf("%s: -want +got:\n%s", name, diff)
		}
	}
}

func inRange(ip, cidr string) bool {
	a, err := netip.ParseAddr(ip)
	return err == nil && netip.MustParsePrefix(cidr).Contains(a)
}

func TestInstanceStatusTransitions(t *testing.T) {
	type args struct {
		opts []Option
		wait bool
		list bool // read with instances.list, not get
	}
	cases := map[string]struct {
		reason string
		args   args
		want   []string // statuses of successive GETs
	}{
		"DefaultWithoutWait": {
			reason: "By default an instance is RUNNING after a couple of GETs.",
			want:   []string{"STAGING", "RUNNING", "RUNNING"},
		},
		"DefaultAfterWait": {
			reason: "Polling the insert operation counts as time passing.",
			args:   args{wait: true},
			want:   []string{"RUNNING"},
		},
		"Listed": {
			reason: "A list of the zone observes its instances as a GET does: a client that polls by listing sees them boot.",
			args:   args{list: true},
			want:   []string{"STAGING", "RUNNING", "RUNNING"},
		},
		"SlowBoot": {
			reason: "WithInstanceBoot stretches PROVISIONING and STAGING.",
			args:   args{opts: []Option{WithInstanceBoot(2, 2)}},
			want:   []string{"PROVISIONING", "STAGING", "STAGING", "RUNNING"},
		},
		"Immediate": {
			reason: "WithInstanceBoot(0, 0) makes an instance RUNNING at once.",
			args:   args{opts: []Option{WithInstanceBoot(0, 0)}},
			want:   []string{"RUNNING"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, c := setup(t, tc.args.opts...)
			ctx := ctxT(t)
			op := insertInstance(ctx, t, c, testZone, instance("vm"))
			if tc.args.wait {
				mustWait(ctx, t, op)
			}
			got := make([]string, 0, len(tc.want))
			for range tc.want {
				var i *computepb.Instance
				var err error
				if tc.args.list {
					i, err = c.inst.List(ctx, &computepb.ListInstancesRequest{Project: testProject, Zone: testZone}).Next()
				} else {
					i, err = c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"})
				}
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				got = append(got, i.GetStatus())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nstatuses: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRequestIDIdempotency(t *testing.T) {
	s, c := setup(t)
	ctx := ctxT(t)
	const rid = "6f1c0a9e-4b1c-4b9f-9a55-3f0d2c7e8b11"
	req := func(name string) *computepb.InsertInstanceRequest {
		return &computepb.InsertInstanceRequest{Project: testProject, Zone: testZone, RequestId: proto.String(rid), InstanceResource: instance(name)}
	}
	first, err := c.inst.Insert(ctx, req("vm"))
	if err != nil {
		t.Fatalf("first Insert: %v", err)
	}
	second, err := c.inst.Insert(ctx, req("vm"))
	if err != nil {
		t.Fatalf("second Insert with the same requestId: %v", err)
	}
	if first.Name() != second.Name() {
		t.Errorf("same requestId: operation %q then %q, want the same", first.Name(), second.Name())
	}
	if n := len(s.Instances()); n != 1 || s.Calls(CallInstancesInsert) != 2 {
		t.Errorf("after two inserts with one requestId: %d instances, %d insert calls; want 1 and 2", n, s.Calls(CallInstancesInsert))
	}
	// A new requestId is a new request: the name now conflicts.
	req2 := req("vm")
	req2.RequestId = proto.String("0e5d6c33-7f4e-4a0b-8d3e-2b9a1c4d5e6f")
	if _, err := c.inst.Insert(ctx, req2); reasonOf(err) != ReasonAlreadyExists {
		t.Errorf("Insert with a new requestId: reason %q (err %v), want alreadyExists", reasonOf(err), err)
	}
	bad := req("vm2")
	bad.RequestId = proto.String("not-a-uuid")
	if _, err := c.inst.Insert(ctx, bad); reasonOf(err) != ReasonInvalid {
		t.Errorf("Insert with a non-UUID requestId: reason %q (err %v), want invalid", reasonOf(err), err)
	}
}

func TestStopStartAndSetStatus(t *testing.T) {
	s, c := setup(t, WithInstanceBoot(0, 0))
	ctx := ctxT(t)
	mustWait(ctx, t, insertInstance(ctx, t, c, testZone, instance("vm")))
	get := func() *computepb.Instance {
		t.Helper()
		i, err := c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"})
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		return i
	}
	natIP := func(i *computepb.Instance) string {
		return i.GetNetworkInterfaces()[0].GetAccessConfigs()[0].GetNatIP()
	}

	op, err := c.inst.Stop(ctx, &computepb.StopInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"})
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	mustWait(ctx, t, op)
	if i := get(); i.GetStatus() != "TERMINATED" || natIP(i) != "" {
		t.Errorf("after Stop: status %q natIP %q, want TERMINATED and the ephemeral IP released", i.GetStatus(), natIP(i))
	}
	op, err = c.inst.Start(ctx, &computepb.StartInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	mustWait(ctx, t, op)
	if i := get(); i.GetStatus() != "RUNNING" || natIP(i) == "" {
		t.Errorf("after Start: status %q natIP %q, want RUNNING with a new ephemeral IP", i.GetStatus(), natIP(i))
	}
	if err := s.SetInstanceStatus(testProject, testZone, "vm", "TERMINATED"); err != nil {
		t.Fatalf("SetInstanceStatus: %v", err)
	}
	if i := get(); i.GetStatus() != "TERMINATED" {
		t.Errorf("after SetInstanceStatus: status %q, want TERMINATED", i.GetStatus())
	}
	if err := s.SetInstanceStatus(testProject, testZone, "nope", "RUNNING"); err == nil {
		t.Error("SetInstanceStatus of a missing instance: want an error")
	}
}

func TestDeleteInstance(t *testing.T) {
	_, c := setup(t, WithOperationPolls(2))
	ctx := ctxT(t)
	ins := insertInstance(ctx, t, c, testZone, instance("vm"))
	for !ins.Done() {
		if err := ins.Poll(ctx); err != nil {
			t.Fatalf("Poll: %v", err)
		}
	}
	op, err := c.inst.Delete(ctx, &computepb.DeleteInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"})
	if err != nil {
		t.Fatalf("Delete: %v", err)
	}
	// Until the delete completes the instance is still there, STOPPING, and
	// a second delete is refused as GCE does.
	i, err := c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"})
	if err != nil || i.GetStatus() != "STOPPING" {
		t.Fatalf("Get during delete: status %q err %v, want STOPPING", i.GetStatus(), err)
	}
	if _, err := c.inst.Delete(ctx, &computepb.DeleteInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"}); reasonOf(err) != ReasonResourceNotReady {
		t.Errorf("second Delete: reason %q (err %v), want resourceNotReady", reasonOf(err), err)
	}
	for !op.Done() {
		if err := op.Poll(ctx); err != nil {
			t.Fatalf("Poll: %v", err)
		}
	}
	_, err = c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"})
	if reasonOf(err) != ReasonNotFound || !strings.Contains(err.Error(), "was not found") {
		t.Errorf("Get after delete: %v, want notFound", err)
	}
}
