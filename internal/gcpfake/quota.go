package gcpfake

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// Quota limits what a project may hold. Zero means no limit. Real GCE
// counts INSTANCES and CPUS per region; the fake counts per project, which
// is what tests of "the next insert fails" need.
type Quota struct {
	// Instances is the most instances the project may have.
	Instances int `json:"instances,omitempty"`
	// CPUs is the most vCPUs its instances that are not TERMINATED may have.
	CPUs int `json:"cpus,omitempty"`
}

// SetQuota sets a project's quota. An insert that would exceed it returns an
// operation that ends DONE with error QUOTA_EXCEEDED and
// httpErrorStatusCode 403, and creates nothing, as on real GCE.
func (s *Server) SetQuota(project string, q Quota) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.quotas[project] = q
}

// quotaFailure checks an insert of an instance with cpus vCPUs against the
// project's quota. The caller holds s.mu.
func (s *Server) quotaFailure(k key, cpus int) *opFailure {
	s.faults.mu.Lock()
	q := s.faults.quotas[k.project]
	s.faults.mu.Unlock()
	if q == (Quota{}) {
		return nil
	}
	n, used := 0, 0
	for ik, rec := range s.st.instances {
		if ik.project != k.project {
			continue
		}
		n++
		if rec.inst.GetStatus() != "TERMINATED" {
			used += machineCPUs(lastSegment(rec.inst.GetMachineType()))
		}
	}
	region := regionOfScope(k.scope)
	if q.Instances > 0 && n+1 > q.Instances {
		return quotaError("INSTANCES", q.Instances, region, http.StatusForbidden)
	}
	if q.CPUs > 0 && used+cpus > q.CPUs {
		return quotaError("CPUS", q.CPUs, region, http.StatusForbidden)
	}
	return nil
}

// quotaError is the operation error GCE reports for an exceeded quota,
// with the quotaInfo details newer responses carry.
func quotaError(metric string, limit int, region string, httpStatus int) *opFailure {
	return &opFailure{
		code:       "QUOTA_EXCEEDED",
		message:    fmt.Sprintf("Quota '%s' exceeded.  Limit: %d.0 in region %s.", metric, limit, region),
		httpStatus: httpStatus,
		details: []*computepb.ErrorDetails{{QuotaInfo: &computepb.QuotaExceededInfo{
			MetricName: proto.String("compute.googleapis.com/" + strings.ToLower(metric)),
			LimitName:  proto.String(metric + "-per-project-region"),
			Dimensions: map[string]string{"region": region},
			Limit:      proto.Float64(float64(limit)),
		}}},
	}
}

// machineCPUs returns the vCPUs of a machine type name:
// n2-standard-4 → 4, custom-2-4096 → 2, e2-small → 2 (shared core).
func machineCPUs(name string) int {
	switch name {
	case "e2-micro", "e2-small", "e2-medium":
		return 2
	case "f1-micro", "g1-small":
		return 1
	}
	parts := strings.Split(name, "-")
	for i, p := range parts {
		if p == "custom" && i+1 < len(parts) {
			if n, err := strconv.Atoi(parts[i+1]); err == nil {
				return n
			}
		}
	}
	if n, err := strconv.Atoi(parts[len(parts)-1]); err == nil && n > 0 {
		return n
	}
	return 1
}
