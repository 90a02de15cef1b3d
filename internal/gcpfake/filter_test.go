package gcpfake

import (
	"sort"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
)

func TestFilter(t *testing.T) {
	vm := &computepb.Instance{
		Name:       proto.String("proxy-web-1"),
		Status:     proto.String("RUNNING"),
		Labels:     map[string]string{"managed-by": "egressproxy", "team": "web"},
		Tags:       &computepb.Tags{Items: []string{"egress-proxy", "ssh"}},
		Scheduling: &computepb.Scheduling{AutomaticRestart: proto.Bool(true)},
	}
	type want struct {
		match bool
		err   bool
	}
	cases := map[string]struct {
		reason string
		filter string
		want   want
	}{
		"Empty":          {"An empty filter matches everything.", ``, want{match: true}},
		"LabelEq":        {"A quoted label value.", `labels.managed-by = "egressproxy"`, want{match: true}},
		"LabelEqBare":    {"A bare label value.", `labels.team = web`, want{match: true}},
		"LabelMismatch":  {"A different label value.", `labels.team = "db"`, want{}},
		"LabelNe":        {"!= on a label.", `labels.team != "db"`, want{match: true}},
		"LabelNeMissing": {"!= on a missing label holds.", `labels.nope != "x"`, want{match: true}},
		"LabelExists":    {"labels.k:* tests presence.", `labels.team:*`, want{match: true}},
		"LabelAbsent":    {"labels.k:* on a missing key.", `labels.owner:*`, want{}},
		"ParenAnd":       {"Parenthesised terms are ANDed.", `(labels.managed-by = "egressproxy") (labels.team = "web")`, want{match: true}},
		"ParenAndFalse":  {"One false term fails the AND.", `(labels.managed-by = "egressproxy") (labels.team = "db")`, want{}},
		"ExplicitAnd":    {"An explicit AND.", `labels.team = web AND status = RUNNING`, want{match: true}},
		"Or":             {"OR of a false and a true term.", `(labels.team = db) OR (name = "proxy-web-1")`, want{match: true}},
		"Not":            {"NOT negates.", `NOT labels.team:*`, want{}},
		"Substring":      {": on a string matches substrings.", `name : web`, want{match: true}},
		"Regexp":         {"eq is a full-match regexp.", `name eq 'proxy-.*'`, want{match: true}},
		"RegexpPartial":  {"eq does not match a part.", `name eq 'proxy'`, want{}},
		"RegexpNe":       {"ne negates eq.", `name ne 'db-.*'`, want{match: true}},
		"Bool":           {"Booleans compare as true/false.", `scheduling.automaticRestart = true`, want{match: true}},
		"List":           {"A list field matches any element.", `tags.items = ssh`, want{match: true}},
		"Unterminated":   {"An unterminated string is an error.", `name = "x`, want{err: true}},
		"MissingValue":   {"A comparison needs a value.", `name =`, want{err: true}},
		"Unbalanced":     {"Parentheses must balance.", `(name = x`, want{err: true}},
		"BadRegexp":      {"eq needs a valid regexp.", `name eq '('`, want{err: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := parseFilter(tc.filter)
			got := want{err: err != nil}
			if err == nil {
				got.match, err = matches(f, vm)
				if err != nil {
					t.Fatalf("matches: %v", err)
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nfilter %q: -want +got:\n%s", tc.reason, tc.filter, diff)
			}
		})
	}
}

func TestAggregatedListLabelFilter(t *testing.T) {
	_, c := setup(t)
	ctx := ctxT(t)
	mine := map[string]string{"managed-by": "egressproxy", "proxy": "p1"}
	for name, zone := range map[string]string{"a1": "us-central1-a", "b1": "us-central1-b", "e1": "europe-west1-b"} {
		mustWait(ctx, t, insertInstance(ctx, t, c, zone, instance(name, withLabels(mine), zoneMod(zone))))
	}
	mustWait(ctx, t, insertInstance(ctx, t, c, testZone, instance("other", withLabels(map[string]string{"team": "db"}))))

	cases := map[string]struct {
		reason string
		filter string
		want   []string
	}{
		"ByLabel":     {"An equality label filter.", `labels.managed-by = "egressproxy"`, []string{"a1", "b1", "e1"}},
		"TwoLabels":   {"Parenthesised terms are ANDed.", `(labels.managed-by = "egressproxy") (labels.proxy = "p1")`, []string{"a1", "b1", "e1"}},
		"KeyExists":   {"labels.k:* selects by key.", `labels.team:*`, []string{"other"}},
		"NoneMatches": {"No match leaves every zone empty.", `labels.proxy = "p2"`, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			it := c.inst.AggregatedList(ctx, &computepb.AggregatedListInstancesRequest{Project: testProject, Filter: proto.String(tc.filter)})
			var got []string
			warned := 0
			for {
				pair, err := it.Next()
				if err != nil {
					break
				}
				if len(pair.Value.GetInstances()) == 0 && pair.Value.GetWarning().GetCode() == "NO_RESULTS_ON_PAGE" {
					warned++
				}
				for _, i := range pair.Value.GetInstances() {
					got = append(got, i.GetName())
				}
			}
			sort.Strings(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
			if zones := len(DefaultZones()); warned == 0 || warned > zones {
				t.Errorf("%s\n%d empty zones carry NO_RESULTS_ON_PAGE", tc.reason, warned)
			}
		})
	}

	// maxResults pages through the results; the iterator follows the tokens.
	it := c.inst.AggregatedList(ctx, &computepb.AggregatedListInstancesRequest{Project: testProject, MaxResults: proto.Uint32(1)})
	n := 0
	for {
		pair, err := it.Next()
		if err != nil {
			break
		}
		n += len(pair.Value.GetInstances())
	}
	if n != 4 {
		t.Errorf("paged aggregatedList found %d instances, want 4", n)
	}
	_, err := c.inst.AggregatedList(ctx, &computepb.AggregatedListInstancesRequest{Project: testProject, Filter: proto.String(`labels.x = "unterminated`)}).Next()
	if reasonOf(err) != ReasonInvalid {
		t.Errorf("bad filter: %v, want invalid", err)
	}
}

func zoneMod(zone string) instanceModifier {
	return func(i *computepb.Instance) { i.MachineType = proto.String("zones/" + zone + "/machineTypes/e2-small") }
}
