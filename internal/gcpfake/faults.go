package gcpfake

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

const errDelay = "injected latency interrupted"

// Match selects the calls a fault applies to. Empty fields match anything,
// so the zero Match matches every compute call.
type Match struct {
	// Call is an API method id such as CallInstancesInsert.
	Call string `json:"call,omitempty"`
	// Method is an HTTP method such as POST.
	Method string `json:"method,omitempty"`
	// Path is a path.Match glob on the URL path, where * stops at a slash:
	// /compute/v1/projects/*/zones/*/instances/*.
	Path string `json:"path,omitempty"`
}

func (m Match) matches(call string, r *http.Request) bool {
	if m.Call != "" && m.Call != call {
		return false
	}
	if m.Method != "" && !strings.EqualFold(m.Method, r.Method) {
		return false
	}
	if m.Path != "" {
		if ok, _ := path.Match(m.Path, r.URL.Path); !ok {
			return false
		}
	}
	return true
}

// ErrorFault makes matching calls fail synchronously with an HTTP error in
// the GCE envelope, before they change anything.
type ErrorFault struct {
	Match Match
	// Code is the HTTP status, e.g. 403, 429 or 503.
	Code int
	// Reason is errors[].reason, e.g. rateLimitExceeded, quotaExceeded,
	// forbidden. Empty picks the usual one for Code.
	Reason string
	// Message is the error message. Empty picks a realistic one.
	Message string
	// Times is how many matching calls fail; 0 means no limit.
	Times int
	// For limits the fault to a duration from now; 0 means no limit.
	For time.Duration
}

// OperationFault makes matching mutating calls (insert, delete, patch,
// stop, start) succeed with an operation that ends DONE with an error, and
// leaves the resource untouched: an insert creates nothing.
type OperationFault struct {
	Match Match
	// Code is error.errors[].code, e.g. QUOTA_EXCEEDED or
	// ZONE_RESOURCE_POOL_EXHAUSTED.
	Code string
	// Message is error.errors[].message. Empty picks a realistic one.
	Message string
	// HTTPStatus sets httpErrorStatusCode (and httpErrorMessage). 0 leaves
	// them out, which makes op.Wait return nil although the op failed.
	HTTPStatus int
	// Times is how many matching calls fail; 0 means no limit.
	Times int
}

// LatencyFault delays matching calls before they are served.
type LatencyFault struct {
	Match Match
	Delay time.Duration
	// Times is how many matching calls are delayed; 0 means no limit.
	Times int
}

type budget struct {
	left  int // remaining uses; <0 means no limit
	until time.Time
}

func newBudget(times int, d time.Duration, now time.Time) budget {
	b := budget{left: times}
	if times <= 0 {
		b.left = -1
	}
	if d > 0 {
		b.until = now.Add(d)
	}
	return b
}

func (b *budget) expired(now time.Time) bool {
	return b.left == 0 || (!b.until.IsZero() && !now.Before(b.until))
}

// use spends one use and reports whether any was left.
func (b *budget) use(now time.Time) bool {
	if b.expired(now) {
		return false
	}
	if b.left > 0 {
		b.left--
	}
	return true
}

// entry is an injected fault with what is left of its budget.
type entry[T any] struct {
	f T
	b budget
}

type faultSet struct {
	mu     sync.Mutex
	now    func() time.Time
	errs   []*entry[ErrorFault]
	ops    []*entry[OperationFault]
	lat    []*entry[LatencyFault]
	quotas map[string]Quota
}

func newFaultSet(now func() time.Time) *faultSet {
	return &faultSet{now: now, quotas: map[string]Quota{}}
}

// InjectError adds an ErrorFault. Faults are tried in the order they were
// added; the first that matches a call decides it.
func (s *Server) InjectError(f ErrorFault) {
	fs := s.faults
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.errs = append(fs.errs, &entry[ErrorFault]{f, newBudget(f.Times, f.For, fs.now())})
}

// FailOperations adds an OperationFault.
func (s *Server) FailOperations(f OperationFault) {
	fs := s.faults
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.ops = append(fs.ops, &entry[OperationFault]{f, newBudget(f.Times, 0, fs.now())})
}

// AddLatency adds a LatencyFault. Delays of all matching faults add up.
func (s *Server) AddLatency(f LatencyFault) {
	fs := s.faults
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.lat = append(fs.lat, &entry[LatencyFault]{f, newBudget(f.Times, 0, fs.now())})
}

// Storm makes every compute call fail with 503 backendError for d, or for
// the next n calls, whichever ends first (0 means no limit for either).
// The client retries 503 on reads until its context ends, so this is how a
// test shows that deadlines bound those retries.
func (s *Server) Storm(d time.Duration, n int) {
	s.InjectError(ErrorFault{Code: http.StatusServiceUnavailable, Reason: ReasonBackendError, Times: n, For: d})
}

// ClearFaults removes every injected error, operation and latency fault,
// and every quota.
func (s *Server) ClearFaults() {
	fs := s.faults
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.errs, fs.ops, fs.lat = nil, nil, nil
	fs.quotas = map[string]Quota{}
}

func (fs *faultSet) takeError(call string, r *http.Request) *apiError {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	now := fs.now()
	for _, e := range fs.errs {
		if e.f.Match.matches(call, r) && e.b.use(now) {
			return syncError(e.f)
		}
	}
	return nil
}

func (fs *faultSet) takeOpFault(call string, r *http.Request, k key) *opFailure {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	now := fs.now()
	for _, o := range fs.ops {
		if o.f.Match.matches(call, r) && o.b.use(now) {
			return operationError(o.f, k)
		}
	}
	return nil
}

func (fs *faultSet) delay(ctx context.Context, call string, r *http.Request) error {
	fs.mu.Lock()
	var d time.Duration
	now := fs.now()
	for _, l := range fs.lat {
		if l.f.Match.matches(call, r) && l.b.use(now) {
			d += l.f.Delay
		}
	}
	fs.mu.Unlock()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return errors.Wrap(ctx.Err(), errDelay)
	}
}

func syncError(f ErrorFault) *apiError {
	reasons := map[int]string{
		400: ReasonInvalid, 401: ReasonAuthRequired, 403: ReasonForbidden, 404: ReasonNotFound,
		409: ReasonAlreadyExists, 429: ReasonRateLimitExceeded,
	}
	e := &apiError{Code: f.Code, Reason: f.Reason, Message: f.Message}
	if e.Reason == "" {
		e.Reason = reasons[f.Code]
		if e.Reason == "" {
			e.Reason = ReasonBackendError
		}
	}
	if e.Message == "" {
		switch e.Reason {
		case ReasonRateLimitExceeded:
			e.Message = "Rate Limit Exceeded"
		case ReasonQuotaExceeded:
			e.Message = "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service 'compute.googleapis.com'."
		case ReasonForbidden:
			e.Message = "Required 'compute.instances.create' permission for the project"
		case ReasonBackendError:
			e.Message = "Internal error. Please try again or contact Google Support."
		default:
			e.Message = http.StatusText(f.Code)
		}
	}
	return e
}

func operationError(f OperationFault, k key) *opFailure {
	out := &opFailure{code: f.Code, message: f.Message, httpStatus: f.HTTPStatus}
	if out.message != "" {
		return out
	}
	switch f.Code {
	case "QUOTA_EXCEEDED":
		return quotaError("CPUS", 0, regionOfScope(k.scope), f.HTTPStatus)
	case "ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS":
		out.message = fmt.Sprintf("The zone 'projects/%s/%s' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.", k.project, k.scope)
	default:
		out.message = "Operation failed: " + f.Code
	}
	return out
}

func regionOfScope(scope string) string {
	_, name, _ := strings.Cut(scope, "/")
	if strings.HasPrefix(scope, "zones/") {
		return regionOf(name)
	}
	return name
}

// callCounter counts calls per API method id.
type callCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func newCallCounter() *callCounter { return &callCounter{n: map[string]int{}} }

func (c *callCounter) inc(call string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[call]++
}

// Calls returns how many requests reached the call (an API method id such
// as CallInstancesInsert), whether they succeeded, failed or were faulted.
func (s *Server) Calls(call string) int {
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	return s.calls.n[call]
}

// CallCounts returns a copy of all call counters.
func (s *Server) CallCounts() map[string]int {
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	out := make(map[string]int, len(s.calls.n))
	for k, v := range s.calls.n {
		out[k] = v
	}
	return out
}

// ResetCalls sets all call counters to zero.
func (s *Server) ResetCalls() {
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	s.calls.n = map[string]int{}
}
