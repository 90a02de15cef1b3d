package gcpfake

import (
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
)

func TestFirewallPatchCorrectsDrift(t *testing.T) {
	s, c := setup(t)
	ctx := ctxT(t)
	fw := &computepb.Firewall{
		Name:       proto.String("allow-squid"),
		Network:    proto.String("global/networks/default"),
		Allowed:    []*computepb.Allowed{{IPProtocol: proto.String("tcp"), Ports: []string{"3128"}}},
		TargetTags: []string{"egress-proxy"},
	}
	op, err := c.fw.Insert(ctx, &computepb.InsertFirewallRequest{Project: testProject, FirewallResource: fw})
	if err != nil {
		t.Fatalf("Insert firewall: %v", err)
	}
	mustWait(ctx, t, op)

	type view struct {
		Ports        []string
		SourceRanges []string
		TargetTags   []string
		Priority     int32
		Direction    string
		Network      string
	}
	viewOf := func(f *computepb.Firewall) view {
		return view{f.GetAllowed()[0].GetPorts(), f.GetSourceRanges(), f.GetTargetTags(), f.GetPriority(), f.GetDirection(), f.GetNetwork()}
	}
	network := linkBase + "projects/test-project/global/networks/default"
	got, err := c.fw.Get(ctx, &computepb.GetFirewallRequest{Project: testProject, Firewall: "allow-squid"})
	if err != nil {
		t.Fatalf("Get firewall: %v", err)
	}
	if diff := cmp.Diff(view{[]string{"3128"}, []string{"0.0.0.0/0"}, []string{"egress-proxy"}, 1000, "INGRESS", network}, viewOf(got)); diff != "" {
		t.Errorf("defaults: -want +got:\n%s", diff)
	}

	// Someone widened the rule; the provider patches it back. Fields absent
	// from the patch (targetTags) are kept.
	patch := &computepb.Firewall{
		Allowed:      []*computepb.Allowed{{IPProtocol: proto.String("tcp"), Ports: []string{"3128"}}},
		SourceRanges: []string{"10.0.0.0/8"},
	}
	op, err = c.fw.Patch(ctx, &computepb.PatchFirewallRequest{Project: testProject, Firewall: "allow-squid", FirewallResource: patch})
	if err != nil {
		t.Fatalf("Patch: %v", err)
	}
	if op.Proto().GetOperationType() != "patch" {
		t.Errorf("patch operationType = %q", op.Proto().GetOperationType())
	}
	mustWait(ctx, t, op)
	got, _ = c.fw.Get(ctx, &computepb.GetFirewallRequest{Project: testProject, Firewall: "allow-squid"})
	if diff := cmp.Diff(view{[]string{"3128"}, []string{"10.0.0.0/8"}, []string{"egress-proxy"}, 1000, "INGRESS", network}, viewOf(got)); diff != "" {
		t.Errorf("after patch: -want +got:\n%s", diff)
	}
	if n := len(s.Firewalls()); n != 1 {
		t.Errorf("Firewalls() has %d, want 1", n)
	}

	_, err = c.fw.Patch(ctx, &computepb.PatchFirewallRequest{Project: testProject, Firewall: "nope", FirewallResource: patch})
	if reasonOf(err) != ReasonNotFound {
		t.Errorf("Patch of a missing firewall: reason %q, want notFound", reasonOf(err))
	}
	bad := &computepb.Firewall{Allowed: []*computepb.Allowed{{IPProtocol: proto.String("icmp"), Ports: []string{"22"}}}}
	_, err = c.fw.Patch(ctx, &computepb.PatchFirewallRequest{Project: testProject, Firewall: "allow-squid", FirewallResource: bad})
	if reasonOf(err) != ReasonInvalid {
		t.Errorf("Patch with ports on icmp: reason %q, want invalid", reasonOf(err))
	}

	it := c.fw.List(ctx, &computepb.ListFirewallsRequest{Project: testProject, Filter: proto.String(`name = "allow-squid"`)})
	if f, err := it.Next(); err != nil || f.GetName() != "allow-squid" {
		t.Errorf("List with a name filter: %v %v", f.GetName(), err)
	}
	op, err = c.fw.Delete(ctx, &computepb.DeleteFirewallRequest{Project: testProject, Firewall: "allow-squid"})
	if err != nil {
		t.Fatalf("Delete: %v", err)
	}
	mustWait(ctx, t, op)
	if _, err := c.fw.Get(ctx, &computepb.GetFirewallRequest{Project: testProject, Firewall: "allow-squid"}); reasonOf(err) != ReasonNotFound {
		t.Errorf("Get after delete: %v, want notFound", err)
	}
}
