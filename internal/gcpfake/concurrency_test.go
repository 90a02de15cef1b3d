package gcpfake

import (
	"fmt"
	"sync"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
)

// TestConcurrentUse runs clients and the Go fault API at the same time; run
// it with -race.
func TestConcurrentUse(t *testing.T) {
	s, c := setup(t)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("vm-%d", i)
			op, err := c.inst.Insert(ctx, &computepb.InsertInstanceRequest{Project: testProject, Zone: testZone, InstanceResource: instance(name)})
			if err != nil {
				return // an injected fault below may hit it
			}
			_ = op.Poll(ctx)
			_, _ = c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: testZone, Instance: name})
			_, _ = c.inst.AggregatedList(ctx, &computepb.AggregatedListInstancesRequest{Project: testProject}).Next()
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			s.InjectError(ErrorFault{Match: Match{Call: CallInstancesInsert}, Code: 403, Reason: ReasonRateLimitExceeded, Times: 1})
			_ = s.Instances()
			_ = s.CallCounts()
			s.SetQuota(testProject, Quota{Instances: 100})
		}
	}()
	wg.Wait()
	if got := s.Calls(CallInstancesInsert); got != 8 {
		t.Errorf("Calls(insert) = %d, want 8", got)
	}
}
