package gcpfake

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/googleapi"
)

func codeOf(err error) int {
	var g *googleapi.Error
	if errors.As(err, &g) {
		return g.Code
	}
	return 0
}

func TestInjectError(t *testing.T) {
	type result struct {
		Code   int
		Reason string
	}
	cases := map[string]struct {
		reason string
		fault  ErrorFault
		want   []result // of successive inserts
	}{
		"RateLimitTwice": {
			reason: "The next two matching calls fail, then calls succeed.",
			fault:  ErrorFault{Match: Match{Call: CallInstancesInsert}, Code: 403, Reason: ReasonRateLimitExceeded, Times: 2},
			want:   []result{{403, ReasonRateLimitExceeded}, {403, ReasonRateLimitExceeded}, {}},
		},
		"QuotaExceededByPath": {
			reason: "A method and path glob select the calls.",
			fault: ErrorFault{Match: Match{Method: "POST", Path: "/compute/v1/projects/*/zones/*/instances"},
				Code: 403, Reason: ReasonQuotaExceeded, Times: 1},
			want: []result{{403, ReasonQuotaExceeded}, {}},
		},
		"OtherCallUnaffected": {
			reason: "A fault for another call leaves inserts alone.",
			fault:  ErrorFault{Match: Match{Call: CallInstancesDelete}, Code: 403, Reason: ReasonForbidden},
			want:   []result{{}},
		},
		"DefaultReason": {
			reason: "An empty reason is filled from the code.",
			fault:  ErrorFault{Code: http.StatusTooManyRequests, Times: 1},
			want:   []result{{429, ReasonRateLimitExceeded}, {}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, c := setup(t)
			ctx := ctxT(t)
			s.InjectError(tc.fault)
			var got []result
			for i := range tc.want {
				in := instance("vm-" + string(rune('a'+i)))
				_, err := c.inst.Insert(ctx, &computepb.InsertInstanceRequest{Project: testProject, Zone: testZone, InstanceResource: in})
				got = append(got, result{codeOf(err), reasonOf(err)})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
			if s.Calls(CallInstancesInsert) != len(tc.want) {
				t.Errorf("%s\nCalls(insert) = %d, want %d: faulted calls count too", tc.reason, s.Calls(CallInstancesInsert), len(tc.want))
			}
		})
	}
}

// TestStorm shows why every call needs a deadline: the client retries 503 on
// reads until its context ends and then reports only the context error.
func TestStorm(t *testing.T) {
	s, c := setup(t)
	ctx := ctxT(t)
	mustWait(ctx, t, insertInstance(ctx, t, c, testZone, instance("vm")))
	s.ResetCalls()
	s.Storm(0, 0)

	short, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
	defer cancel()
	_, err := c.inst.Get(short, &computepb.GetInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get during a storm: %v, want context.DeadlineExceeded", err)
	}
	if n := s.Calls(CallInstancesGet); n < 2 {
		t.Errorf("Get during a storm reached the fake %d times, want retries", n)
	}
	// Inserts are not retried: the 503 comes straight back.
	_, err = c.inst.Insert(ctx, &computepb.InsertInstanceRequest{Project: testProject, Zone: testZone, InstanceResource: instance("vm2")})
	if codeOf(err) != http.StatusServiceUnavailable {
		t.Errorf("Insert during a storm: %v, want 503", err)
	}

	s.ClearFaults()
	s.Storm(0, 2) // two failures, then the retry gets through
	if _, err := c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"}); err != nil {
		t.Errorf("Get after a two-call storm: %v, want success after retries", err)
	}

	s.ClearFaults()
	s.Storm(50*time.Millisecond, 0)
	time.Sleep(60 * time.Millisecond)
	if _, err := c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"}); err != nil {
		t.Errorf("Get after the storm's duration: %v", err)
	}
}

func TestLatency(t *testing.T) {
	s, c := setup(t)
	ctx := ctxT(t)
	s.AddLatency(LatencyFault{Match: Match{Call: CallInstancesList}, Delay: 250 * time.Millisecond, Times: 1})
	start := time.Now()
	it := c.inst.List(ctx, &computepb.ListInstancesRequest{Project: testProject, Zone: testZone})
	if _, err := it.Next(); err == nil {
		t.Error("List of an empty zone returned an item")
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("List took %v, want at least the injected 250ms", d)
	}
	start = time.Now()
	_, _ = c.inst.List(ctx, &computepb.ListInstancesRequest{Project: testProject, Zone: testZone}).Next()
	if d := time.Since(start); d >= 250*time.Millisecond {
		t.Errorf("second List took %v: the latency was for one call", d)
	}
}
