package gcpfake

import (
	"errors"
	"net/http"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/googleapi"
	"google.golang.org/protobuf/proto"
)

// TestSetInstanceLabelsAndTags checks instances.setLabels and setTags: each
// needs the current fingerprint of what it replaces (labelFingerprint,
// tags.fingerprint), so of two callers that read the same value only the
// first writes; a change gives a new fingerprint and a zone operation, and
// leaves the rest of the instance (its ID, creation time, the other
// fingerprint) as it was.
func TestSetInstanceLabelsAndTags(t *testing.T) {
	type want struct {
		code   int
		reason string
		msg    string
	}
	labelsStale := want{http.StatusPreconditionFailed, ReasonConditionNotMet, "Labels fingerprint either invalid or resource labels have changed"}
	tagsStale := want{http.StatusPreconditionFailed, ReasonConditionNotMet, "Supplied fingerprint does not match current fingerprint."}
	cases := map[string]struct {
		reason string
		call   string
		// fp picks the fingerprint sent: "current", "stale" or "none".
		fp     string
		labels map[string]string
		tags   []string
		want   want
		// wantLabels and wantTags are the instance's afterwards.
		wantLabels map[string]string
		wantTags   []string
	}{
		"LabelsCurrent": {
			reason: "With the current labelFingerprint the labels are replaced.",
			call:   CallInstancesSetLabels, fp: "current",
			labels:     map[string]string{"team": "b", "egressproxy-owner": "x"},
			wantLabels: map[string]string{"team": "b", "egressproxy-owner": "x"}, wantTags: []string{"second"},
		},
		"LabelsStale": {
			reason: "A labelFingerprint from before the last change is 412 conditionNotMet, and nothing changes.",
			call:   CallInstancesSetLabels, fp: "stale",
			labels: map[string]string{"team": "c"}, want: labelsStale,
			wantLabels: map[string]string{"team": "a"}, wantTags: []string{"second"},
		},
		"LabelsMissing": {
			reason: "No labelFingerprint is refused as a stale one is.",
			call:   CallInstancesSetLabels, fp: "none",
			labels: map[string]string{"team": "c"}, want: labelsStale,
			wantLabels: map[string]string{"team": "a"}, wantTags: []string{"second"},
		},
		"LabelsInvalid": {
			reason: "Label keys are checked as on insert.",
			call:   CallInstancesSetLabels, fp: "current",
			labels: map[string]string{"Team": "c"}, want: want{http.StatusBadRequest, ReasonInvalid, ""},
			wantLabels: map[string]string{"team": "a"}, wantTags: []string{"second"},
		},
		"TagsCurrent": {
			reason: "With the current tags.fingerprint the tags are replaced.",
			call:   CallInstancesSetTags, fp: "current",
			tags:       []string{"third", "fourth"},
			wantLabels: map[string]string{"team": "a"}, wantTags: []string{"third", "fourth"},
		},
		"TagsCleared": {
			reason: "An empty list clears the tags.",
			call:   CallInstancesSetTags, fp: "current",
			wantLabels: map[string]string{"team": "a"},
		},
		"TagsStale": {
			reason: "A tags fingerprint from before the last change is 412 conditionNotMet, and nothing changes.",
			call:   CallInstancesSetTags, fp: "stale",
			tags: []string{"third"}, want: tagsStale,
			wantLabels: map[string]string{"team": "a"}, wantTags: []string{"second"},
		},
		"TagsMissing": {
			reason: "No fingerprint is refused as a stale one is.",
			call:   CallInstancesSetTags, fp: "none",
			tags: []string{"third"}, want: tagsStale,
			wantLabels: map[string]string{"team": "a"}, wantTags: []string{"second"},
		},
		"TagsInvalid": {
			reason: "Tags are RFC 1035 names, as on insert.",
			call:   CallInstancesSetTags, fp: "current",
			tags: []string{"Not_A_Tag"}, want: want{http.StatusBadRequest, ReasonInvalid, ""},
			wantLabels: map[string]string{"team": "a"}, wantTags: []string{"second"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, c := setup(t)
			ctx := ctxT(t)
			mustWait(ctx, t, insertInstance(ctx, t, c, testZone, instance("vm", withLabels(map[string]string{"team": "x"}))))
			get := func() *computepb.Instance {
				t.Helper()
				i, err := c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"})
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				return i
			}
			setLabels := func(fp *string, l map[string]string) error {
				op, err := c.inst.SetLabels(ctx, &computepb.SetLabelsInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm",
					InstancesSetLabelsRequestResource: &computepb.InstancesSetLabelsRequest{LabelFingerprint: fp, Labels: l}})
				if err != nil {
					return err
				}
				mustWait(ctx, t, op)
				if op.Proto().GetOperationType() != "setLabels" || op.Proto().GetZone() == "" {
					t.Errorf("operation: type %q zone %q; want a zone operation setLabels", op.Proto().GetOperationType(), op.Proto().GetZone())
				}
				return nil
			}
			setTags := func(fp *string, tags []string) error {
				op, err := c.inst.SetTags(ctx, &computepb.SetTagsInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm",
					TagsResource: &computepb.Tags{Fingerprint: fp, Items: tags}})
				if err != nil {
					return err
				}
				mustWait(ctx, t, op)
				if op.Proto().GetOperationType() != "setTags" || op.Proto().GetZone() == "" {
					t.Errorf("operation: type %q zone %q; want a zone operation setTags", op.Proto().GetOperationType(), op.Proto().GetZone())
				}
				return nil
			}
			// Every case starts from a change of both, which makes the
			// fingerprints read at first stale.
			first := get()
			if err := setLabels(first.LabelFingerprint, map[string]string{"team": "a"}); err != nil {
				t.Fatalf("the first setLabels: %v", err)
			}
			if err := setTags(first.GetTags().Fingerprint, []string{"second"}); err != nil {
				t.Fatalf("the first setTags: %v", err)
			}
			before := get()
			if before.GetLabelFingerprint() == first.GetLabelFingerprint() || before.GetTags().GetFingerprint() == first.GetTags().GetFingerprint() {
				t.Fatal("setLabels and setTags must change their fingerprints")
			}
			var fp *string
			switch {
			case tc.fp == "current" && tc.call == CallInstancesSetLabels:
				fp = before.LabelFingerprint
			case tc.fp == "current":
				fp = before.GetTags().Fingerprint
			case tc.fp == "stale" && tc.call == CallInstancesSetLabels:
				fp = first.LabelFingerprint
			case tc.fp == "stale":
				fp = first.GetTags().Fingerprint
			}
			var err error
			if tc.call == CallInstancesSetLabels {
				err = setLabels(fp, tc.labels)
			} else {
				err = setTags(fp, tc.tags)
			}
			var g *googleapi.Error
			switch {
			case tc.want.code == 0 && err != nil:
				t.Errorf("%s\n%s: %v", tc.reason, tc.call, err)
			case tc.want.code != 0 && (!errors.As(err, &g) || g.Code != tc.want.code || reasonOf(err) != tc.want.reason ||
				(tc.want.msg != "" && g.Message != tc.want.msg)):
				t.Errorf("%s\n%s: %v, want %d %s %q", tc.reason, tc.call, err, tc.want.code, tc.want.reason, tc.want.msg)
			}
			after := get()
			if diff := cmp.Diff(tc.wantLabels, after.GetLabels()); diff != "" {
				t.Errorf("%s\nlabels: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantTags, after.GetTags().GetItems()); diff != "" {
				t.Errorf("%s\ntags: -want +got:\n%s", tc.reason, diff)
			}
			labelsChanged := after.GetLabelFingerprint() != before.GetLabelFingerprint()
			tagsChanged := after.GetTags().GetFingerprint() != before.GetTags().GetFingerprint()
			ok := tc.want.code == 0
			if labelsChanged != (ok && tc.call == CallInstancesSetLabels) || tagsChanged != (ok && tc.call == CallInstancesSetTags) {
				t.Errorf("%s\nlabelFingerprint changed: %v, tags fingerprint changed: %v", tc.reason, labelsChanged, tagsChanged)
			}
			if after.GetId() != first.GetId() || after.GetCreationTimestamp() != first.GetCreationTimestamp() ||
				after.GetMetadata().GetFingerprint() != first.GetMetadata().GetFingerprint() || after.GetStatus() != first.GetStatus() {
				t.Errorf("%s\nthe rest of the instance changed: %v", tc.reason, cmp.Diff(first, after))
			}
			if n := s.Calls(tc.call); n != 2 {
				t.Errorf("%d %s calls counted, want 2", n, tc.call)
			}
		})
	}
	t.Run("NotFound", func(t *testing.T) {
		_, c := setup(t)
		ctx := ctxT(t)
		_, err := c.inst.SetLabels(ctx, &computepb.SetLabelsInstanceRequest{Project: testProject, Zone: testZone, Instance: "nope",
			InstancesSetLabelsRequestResource: &computepb.InstancesSetLabelsRequest{LabelFingerprint: proto.String("x")}})
		if reasonOf(err) != ReasonNotFound {
			t.Errorf("setLabels of a missing instance: %v, want %s", err, ReasonNotFound)
		}
		_, err = c.inst.SetTags(ctx, &computepb.SetTagsInstanceRequest{Project: testProject, Zone: testZone, Instance: "nope",
			TagsResource: &computepb.Tags{Fingerprint: proto.String("x")}})
		if reasonOf(err) != ReasonNotFound {
			t.Errorf("setTags of a missing instance: %v, want %s", err, ReasonNotFound)
		}
	})
	t.Run("ReplayedRequestID", func(t *testing.T) {
		_, c := setup(t)
		ctx := ctxT(t)
		mustWait(ctx, t, insertInstance(ctx, t, c, testZone, instance("vm")))
		i, err := c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"})
		if err != nil {
			t.Fatal(err)
		}
		const rid = "7d3e1c2b-4a5f-4e6d-8c9b-0a1b2c3d4e5f"
		var names []string
		for range 2 {
			// The second call's fingerprint is stale: the replay answers
			// before the fingerprint is checked, as for setMetadata.
			op, err := c.inst.SetTags(ctx, &computepb.SetTagsInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm",
				RequestId: proto.String(rid), TagsResource: &computepb.Tags{Fingerprint: i.GetTags().Fingerprint, Items: []string{"x"}}})
			if err != nil {
				t.Fatalf("setTags: %v", err)
			}
			names = append(names, op.Name())
		}
		if names[0] != names[1] {
			t.Errorf("a replayed requestId got operation %q, want the first one %q", names[1], names[0])
		}
	})
}
