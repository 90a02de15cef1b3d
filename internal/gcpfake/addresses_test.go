package gcpfake

import (
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
)

func TestAddressLifecycle(t *testing.T) {
	s, c := setup(t)
	ctx := ctxT(t)
	op, err := c.addr.Insert(ctx, &computepb.InsertAddressRequest{Project: testProject, Region: testRegion,
		AddressResource: &computepb.Address{Name: proto.String("proxy-ip")}})
	if err != nil {
		t.Fatalf("Insert address: %v", err)
	}
	if got := op.Proto().GetRegion(); got != linkBase+"projects/test-project/regions/us-central1" {
		t.Errorf("address operation region = %q", got)
	}
	mustWait(ctx, t, op)
	getAddr := func() *computepb.Address {
		t.Helper()
		a, err := c.addr.Get(ctx, &computepb.GetAddressRequest{Project: testProject, Region: testRegion, Address: "proxy-ip"})
		if err != nil {
			t.Fatalf("Get address: %v", err)
		}
		return a
	}
	type state struct {
		Status string
		Users  []string
	}
	a := getAddr()
	if diff := cmp.Diff(state{Status: "RESERVED"}, state{a.GetStatus(), a.GetUsers()}); diff != "" {
		t.Errorf("new address: -want +got:\n%s", diff)
	}
	if a.GetAddress() != "203.0.113.2" {
		t.Errorf("allocated address = %q, want the first of 203.0.113.0/24", a.GetAddress())
	}

	mustWait(ctx, t, insertInstance(ctx, t, c, testZone, instance("vm", withNatIP(a.GetAddress()))))
	vm, _ := s.Instance(testProject, testZone, "vm")
	if got := vm.GetNetworkInterfaces()[0].GetAccessConfigs()[0].GetNatIP(); got != a.GetAddress() {
		t.Errorf("instance natIP = %q, want the static %q", got, a.GetAddress())
	}
	a = getAddr()
	if diff := cmp.Diff(state{"IN_USE", []string{vm.GetSelfLink()}}, state{a.GetStatus(), a.GetUsers()}); diff != "" {
		t.Errorf("address used by an instance: -want +got:\n%s", diff)
	}

	// A second instance cannot take the same IP: the insert is accepted and
	// its operation fails, with httpErrorStatusCode, so Wait returns it.
	op2 := insertInstance(ctx, t, c, testZone, instance("vm2", withNatIP(a.GetAddress())))
	if err := op2.Wait(ctx); err == nil {
		t.Error("Wait on an insert reusing an IN_USE address: want an error")
	}
	if got := op2.Proto().GetError().GetErrors()[0].GetCode(); got != "IP_IN_USE_BY_ANOTHER_RESOURCE" {
		t.Errorf("error code = %q, want IP_IN_USE_BY_ANOTHER_RESOURCE", got)
	}

	del, err := c.inst.Delete(ctx, &computepb.DeleteInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"})
	if err != nil {
		t.Fatalf("Delete instance: %v", err)
	}
	mustWait(ctx, t, del)
	a = getAddr()
	if diff := cmp.Diff(state{Status: "RESERVED"}, state{a.GetStatus(), a.GetUsers()}); diff != "" {
		t.Errorf("after the instance is deleted: -want +got:\n%s", diff)
	}

	// A natIP that is not a reserved address of the region is refused.
	_, err = c.inst.Insert(ctx, &computepb.InsertInstanceRequest{Project: testProject, Zone: testZone,
		InstanceResource: instance("vm3", withNatIP("203.0.113.99"))})
	if reasonOf(err) != ReasonInvalid {
		t.Errorf("Insert with an unknown natIP: reason %q (err %v), want invalid", reasonOf(err), err)
	}

	dop, err := c.addr.Delete(ctx, &computepb.DeleteAddressRequest{Project: testProject, Region: testRegion, Address: "proxy-ip"})
	if err != nil {
		t.Fatalf("Delete address: %v", err)
	}
	mustWait(ctx, t, dop)
	it := c.addr.List(ctx, &computepb.ListAddressesRequest{Project: testProject, Region: testRegion})
	if a, err := it.Next(); err == nil {
		t.Errorf("List after delete returned %q, want nothing", a.GetName())
	}
}

func TestStrictAddressDelete(t *testing.T) {
	_, c := setup(t, WithStrictAddressDelete())
	ctx := ctxT(t)
	op, err := c.addr.Insert(ctx, &computepb.InsertAddressRequest{Project: testProject, Region: testRegion,
		AddressResource: &computepb.Address{Name: proto.String("ip"), Address: proto.String("203.0.113.50")}})
	if err != nil {
		t.Fatalf("Insert address: %v", err)
	}
	mustWait(ctx, t, op)
	mustWait(ctx, t, insertInstance(ctx, t, c, testZone, instance("vm", withNatIP("203.0.113.50"))))
	_, err = c.addr.Delete(ctx, &computepb.DeleteAddressRequest{Project: testProject, Region: testRegion, Address: "ip"})
	if reasonOf(err) != ReasonResourceInUse {
		t.Errorf("Delete of an IN_USE address in strict mode: reason %q (err %v), want %s", reasonOf(err), err, ReasonResourceInUse)
	}
}

func TestStaticAddressRange(t *testing.T) {
	cases := map[string]struct {
		reason string
		opts   []Option
		n      int
		want   string // the last address allocated
	}{
		"Default": {
			reason: "By default addresses come from 203.0.113.0/24.",
			n:      1,
			want:   "203.0.113.2",
		},
		"Wider": {
			reason: "WithStaticAddressRange serves more than the 253 addresses of a /24, for a bench of many proxies.",
			opts:   []Option{WithStaticAddressRange("198.18.0.0/15")},
			n:      300,
			want:   "198.18.1.45",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := New(append([]Option{WithProjects(testProject), WithOperationPolls(0)}, tc.opts...)...)
			s.mu.Lock()
			var got string
			for range tc.n {
				got, _ = s.st.static.take()
			}
			s.mu.Unlock()
			if got != tc.want {
				t.Errorf("%s\naddress %d = %q, want %q", tc.reason, tc.n, got, tc.want)
			}
		})
	}
}

// TestAddressSetLabels checks addresses.setLabels: it needs the current
// labelFingerprint, so of two callers that read the same labels only the
// first writes; and the labels stay while the address is used and freed.
func TestAddressSetLabels(t *testing.T) {
	_, c := setup(t)
	ctx := ctxT(t)
	op, err := c.addr.Insert(ctx, &computepb.InsertAddressRequest{Project: testProject, Region: testRegion,
		AddressResource: &computepb.Address{Name: proto.String("ip"), Labels: map[string]string{"team": "a"}}})
	if err != nil {
		t.Fatalf("Insert address: %v", err)
	}
	mustWait(ctx, t, op)
	get := func() *computepb.Address {
		t.Helper()
		a, err := c.addr.Get(ctx, &computepb.GetAddressRequest{Project: testProject, Region: testRegion, Address: "ip"})
		if err != nil {
			t.Fatalf("Get address: %v", err)
		}
		return a
	}
	set := func(fp *string, labels map[string]string) error {
		op, err := c.addr.SetLabels(ctx, &computepb.SetLabelsAddressRequest{Project: testProject, Region: testRegion, Resource: "ip",
			RegionSetLabelsRequestResource: &computepb.RegionSetLabelsRequest{LabelFingerprint: fp, Labels: labels}})
		if err == nil {
			err = op.Wait(ctx)
		}
		return err
	}
	read := get()
	if err := set(read.LabelFingerprint, map[string]string{"owner": "a"}); err != nil {
		t.Fatalf("setLabels with the current fingerprint: %v", err)
	}
	if err := set(read.LabelFingerprint, map[string]string{"owner": "b"}); reasonOf(err) != ReasonConditionNotMet {
		t.Errorf("setLabels with a stale fingerprint = %v, want %s", err, ReasonConditionNotMet)
	}
	if err := set(nil, map[string]string{"owner": "b"}); reasonOf(err) != ReasonRequired {
		t.Errorf("setLabels without a fingerprint = %v, want %s", err, ReasonRequired)
	}
	if err := set(get().LabelFingerprint, map[string]string{"Owner": "b"}); reasonOf(err) != ReasonInvalid {
		t.Errorf("setLabels with an invalid key = %v, want %s", err, ReasonInvalid)
	}
	a := get()
	if diff := cmp.Diff(map[string]string{"owner": "a"}, a.GetLabels()); diff != "" {
		t.Errorf("labels: -want +got:\n%s", diff)
	}
	if a.GetLabelFingerprint() == read.GetLabelFingerprint() {
		t.Error("setLabels must change the labelFingerprint")
	}
	mustWait(ctx, t, insertInstance(ctx, t, c, testZone, instance("vm", withNatIP(a.GetAddress()))))
	del, err := c.inst.Delete(ctx, &computepb.DeleteInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"})
	if err != nil {
		t.Fatalf("Delete instance: %v", err)
	}
	mustWait(ctx, t, del)
	if a := get(); a.GetStatus() != "RESERVED" || !cmp.Equal(a.GetLabels(), map[string]string{"owner": "a"}) {
		t.Errorf("after its user is deleted: status %s labels %v, want RESERVED with the labels kept", a.GetStatus(), a.GetLabels())
	}
}
