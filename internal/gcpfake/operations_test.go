package gcpfake

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/googleapi"
	"google.golang.org/protobuf/proto"
)

// TestFailedOperation shows the trap the GCP backend must handle: an insert
// whose operation ends DONE with error.errors[] but WITHOUT
// httpErrorStatusCode makes op.Wait return nil. compute's Poll only turns an
// operation into an error when httpErrorStatusCode is set and not 2xx, so
// the backend must always read op.Proto().GetError() after Wait.
func TestFailedOperation(t *testing.T) {
	type want struct {
		waitErr  bool
		httpCode int // of the Wait error
		code     string
		created  bool
	}
	cases := map[string]struct {
		reason string
		fault  OperationFault
		want   want
	}{
		"QuotaWithHTTPStatus": {
			reason: "With httpErrorStatusCode 403 Wait returns an error carrying that code.",
			fault:  OperationFault{Code: "QUOTA_EXCEEDED", HTTPStatus: http.StatusForbidden},
			want:   want{waitErr: true, httpCode: 403, code: "QUOTA_EXCEEDED"},
		},
		"PoolExhaustedWithHTTPStatus": {
			reason: "ZONE_RESOURCE_POOL_EXHAUSTED comes with 503 on real GCE.",
			fault:  OperationFault{Code: "ZONE_RESOURCE_POOL_EXHAUSTED", HTTPStatus: http.StatusServiceUnavailable},
			want:   want{waitErr: true, httpCode: 503, code: "ZONE_RESOURCE_POOL_EXHAUSTED"},
		},
		"PoolExhaustedWithoutHTTPStatus": {
			reason: "Without httpErrorStatusCode Wait returns nil; only op.Proto().GetError() shows the failure.",
			fault:  OperationFault{Code: "ZONE_RESOURCE_POOL_EXHAUSTED"},
			want:   want{code: "ZONE_RESOURCE_POOL_EXHAUSTED"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, c := setup(t)
			ctx := ctxT(t)
			tc.fault.Match = Match{Call: CallInstancesInsert}
			tc.fault.Times = 1
			s.FailOperations(tc.fault)
			op := insertInstance(ctx, t, c, testZone, instance("vm"))
			err := op.Wait(ctx)
			got := want{waitErr: err != nil}
			var g *googleapi.Error
			if errors.As(err, &g) {
				got.httpCode = g.Code
			}
			if es := op.Proto().GetError().GetErrors(); len(es) == 1 {
				got.code = es[0].GetCode()
			}
			_, got.created = s.Instance(testProject, testZone, "vm")
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
			if !op.Done() {
				t.Errorf("%s\noperation not DONE after Wait", tc.reason)
			}
			// The fault was for one call: the retry succeeds.
			mustWait(ctx, t, insertInstance(ctx, t, c, testZone, instance("vm")))
		})
	}
}

func TestQuota(t *testing.T) {
	s, c := setup(t)
	ctx := ctxT(t)
	s.SetQuota(testProject, Quota{Instances: 1})
	mustWait(ctx, t, insertInstance(ctx, t, c, testZone, instance("one")))
	op := insertInstance(ctx, t, c, testZone, instance("two"))
	err := op.Wait(ctx)
	var g *googleapi.Error
	if !errors.As(err, &g) || g.Code != http.StatusForbidden {
		t.Fatalf("Wait over quota: %v, want a 403", err)
	}
	e := op.Proto().GetError().GetErrors()[0]
	if e.GetCode() != "QUOTA_EXCEEDED" || !strings.Contains(e.GetMessage(), "Quota 'INSTANCES' exceeded") {
		t.Errorf("operation error = %s: %s", e.GetCode(), e.GetMessage())
	}
	if q := e.GetErrorDetails()[0].GetQuotaInfo(); q.GetLimit() != 1 || q.GetDimensions()["region"] != testRegion {
		t.Errorf("quotaInfo = %v", q)
	}
	if _, ok := s.Instance(testProject, testZone, "two"); ok {
		t.Error("an insert over quota created the instance")
	}

	s.SetQuota(testProject, Quota{CPUs: 3}) // e2-small has 2 vCPUs
	op = insertInstance(ctx, t, c, testZone, instance("three"))
	_ = op.Wait(ctx)
	if got := op.Proto().GetError().GetErrors()[0].GetMessage(); !strings.Contains(got, "Quota 'CPUS' exceeded.  Limit: 3.0") {
		t.Errorf("CPU quota message = %q", got)
	}
}

// TestMultiPollOperations drives Poll directly: Wait sleeps about a second
// between polls, which tests must not pay for.
func TestMultiPollOperations(t *testing.T) {
	_, c := setup(t, WithOperationPolls(3))
	ctx := ctxT(t)
	op := insertInstance(ctx, t, c, testZone, instance("vm"))
	got := []string{op.Proto().GetStatus().String()}
	for !op.Done() {
		if err := op.Poll(ctx); err != nil {
			t.Fatalf("Poll: %v", err)
		}
		got = append(got, op.Proto().GetStatus().String())
	}
	if diff := cmp.Diff([]string{"PENDING", "RUNNING", "RUNNING", "DONE"}, got); diff != "" {
		t.Errorf("statuses: -want +got:\n%s", diff)
	}
	p := op.Proto()
	if p.GetProgress() != 100 || p.GetEndTime() == "" || p.GetInsertTime() == "" || !strings.HasSuffix(p.GetSelfLink(), "/operations/"+p.GetName()) {
		t.Errorf("DONE operation fields: progress %d endTime %q insertTime %q selfLink %q", p.GetProgress(), p.GetEndTime(), p.GetInsertTime(), p.GetSelfLink())
	}

	// The wait endpoint completes a pending operation in one call.
	op2 := insertInstance(ctx, t, c, testZone, instance("vm2"))
	w, err := c.zop.Wait(ctx, &computepb.WaitZoneOperationRequest{Project: testProject, Zone: testZone, Operation: op2.Name()})
	if err != nil || w.GetStatus() != computepb.Operation_DONE {
		t.Errorf("ZoneOperations.Wait: status %v err %v, want DONE", w.GetStatus(), err)
	}

	// Region and global operations are served too.
	aop, err := c.addr.Insert(ctx, &computepb.InsertAddressRequest{Project: testProject, Region: testRegion,
		AddressResource: &computepb.Address{Name: proto.String("ip")}})
	if err != nil {
		t.Fatalf("Insert address: %v", err)
	}
	if r, err := c.rop.Wait(ctx, &computepb.WaitRegionOperationRequest{Project: testProject, Region: testRegion, Operation: aop.Name()}); err != nil || r.GetStatus() != computepb.Operation_DONE {
		t.Errorf("RegionOperations.Wait: %v %v", r.GetStatus(), err)
	}
	fop, err := c.fw.Insert(ctx, &computepb.InsertFirewallRequest{Project: testProject, FirewallResource: &computepb.Firewall{
		Name: proto.String("fw"), Allowed: []*computepb.Allowed{{IPProtocol: proto.String("tcp")}}}})
	if err != nil {
		t.Fatalf("Insert firewall: %v", err)
	}
	if g, err := c.gop.Get(ctx, &computepb.GetGlobalOperationRequest{Project: testProject, Operation: fop.Name()}); err != nil || g.GetName() != fop.Name() {
		t.Errorf("GlobalOperations.Get: %v %v", g.GetName(), err)
	}
	if _, err := c.zop.Get(ctx, &computepb.GetZoneOperationRequest{Project: testProject, Zone: testZone, Operation: "operation-nope"}); reasonOf(err) != ReasonNotFound {
		t.Errorf("Get of a missing operation: %v, want notFound", err)
	}
}
