package gcpfake

import (
	"net/http"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
)

// opFailure is how an operation ends when the change it stands for fails
// after the call was accepted: DONE with error.errors[], and optionally
// httpErrorStatusCode, which is what makes op.Wait return an error.
type opFailure struct {
	code       string
	message    string
	httpStatus int
	details    []*computepb.ErrorDetails
}

// newOp records a pending operation. Call startOp once onDone and instance
// are set: an operation that needs no observation completes right there.
// The caller holds s.mu.
func (s *Server) newOp(project, scope, opType, target string, targetID uint64) *opRec {
	now := s.cfg.clock()
	id := s.st.newID()
	k := key{project: project, scope: scope, name: opName(now, s.st.seq)}
	op := &computepb.Operation{
		Kind:          proto.String("compute#operation"),
		Id:            proto.Uint64(id),
		Name:          proto.String(k.name),
		OperationType: proto.String(opType),
		TargetLink:    proto.String(target),
		TargetId:      proto.Uint64(targetID),
		Status:        computepb.Operation_RUNNING.Enum(),
		Progress:      proto.Int32(0),
		User:          proto.String("gcpfake@" + project + ".iam.gserviceaccount.com"),
		InsertTime:    proto.String(timestamp(now)),
		StartTime:     proto.String(timestamp(now)),
		SelfLink:      proto.String(k.link("operations")),
	}
	switch {
	case strings.HasPrefix(scope, "zones/"):
		op.Zone = proto.String(scopeLink(project, scope))
	case strings.HasPrefix(scope, "regions/"):
		op.Region = proto.String(scopeLink(project, scope))
	}
	rec := &opRec{op: op, key: k, left: s.cfg.opPolls}
	if rec.left >= 2 {
		// A call GCE has queued but not begun reports PENDING.
		op.Status = computepb.Operation_PENDING.Enum()
	}
	s.st.ops[k] = rec
	return rec
}

func (s *Server) startOp(rec *opRec) {
	if rec.left <= 0 {
		s.finishOp(rec)
	}
}

// advanceOp counts one observation of a pending operation.
func (s *Server) advanceOp(rec *opRec) {
	if rec.done() {
		return
	}
	rec.left--
	if rec.left <= 0 {
		s.finishOp(rec)
		return
	}
	rec.op.Status = computepb.Operation_RUNNING.Enum()
	rec.op.Progress = proto.Int32(int32(100 / (rec.left + 1)))
}

func (s *Server) finishOp(rec *opRec) {
	op := rec.op
	op.Status = computepb.Operation_DONE.Enum()
	op.Progress = proto.Int32(100)
	op.EndTime = proto.String(timestamp(s.cfg.clock()))
	if f := rec.fail; f != nil {
		op.Error = &computepb.Error{Errors: []*computepb.Errors{{
			Code: proto.String(f.code), Message: proto.String(f.message), ErrorDetails: f.details,
		}}}
		if f.httpStatus != 0 {
			op.HttpErrorStatusCode = proto.Int32(int32(f.httpStatus))
			op.HttpErrorMessage = proto.String(strings.ToUpper(http.StatusText(f.httpStatus)))
		}
		return
	}
	if rec.onDone != nil {
		rec.onDone()
	}
}

// observeTarget counts a GET of a resource as an observation of every
// operation still pending on it, so a caller that polls the resource rather
// than the operation still sees it complete, as it would on real GCE.
func (s *Server) observeTarget(link string) {
	for _, rec := range s.st.ops {
		if !rec.done() && rec.op.GetTargetLink() == link {
			s.advanceOp(rec)
		}
	}
}

func (s *Server) getOperation(kind scopeKind, wait bool) handlerFunc {
	return func(r *http.Request) (proto.Message, error) {
		project := r.PathValue("project")
		scope, e := s.scopeFromPath(kind, r)
		if e != nil {
			return nil, e
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		k := key{project: project, scope: scope, name: r.PathValue("name")}
		rec := s.st.ops[k]
		if rec == nil {
			return nil, errNotFound(k.path("operations"))
		}
		s.pollOp(rec)
		// Real wait blocks until DONE (up to 2 minutes); here time only
		// passes through observations, so wait makes them all at once.
		for wait && !rec.done() {
			s.pollOp(rec)
		}
		return proto.Clone(rec.op), nil
	}
}

// pollOp is one GET of an operation. Each poll of an insert or start also
// moves the instance's boot on, even once the operation is DONE: time passes.
func (s *Server) pollOp(rec *opRec) {
	s.advanceOp(rec)
	if rec.instance != nil {
		s.stepInstance(*rec.instance)
	}
}

func (s *Server) scopeFromPath(kind scopeKind, r *http.Request) (string, *apiError) {
	project := r.PathValue("project")
	switch kind {
	case scopeZone:
		z := r.PathValue("zone")
		return "zones/" + z, s.checkZone(project, z)
	case scopeRegion:
		reg := r.PathValue("region")
		return "regions/" + reg, s.checkRegion(project, reg)
	default:
		return "global", s.checkProject(project)
	}
}

// replay returns the operation an earlier call with the same requestId
// started in this project, or nil. GCE dedupes on (project, requestId) and
// rejects ids that are not UUIDs, or are the zero UUID.
func (s *Server) replay(project string, r *http.Request) (*computepb.Operation, *apiError) {
	rid := r.URL.Query().Get("requestId")
	if rid == "" {
		return nil, nil
	}
	if u, err := uuid.Parse(rid); err != nil || u == uuid.Nil {
		return nil, errInvalid("requestId", rid,
			"The request ID must be a valid UUID with the exception that zero UUID is not supported.")
	}
	if k, ok := s.st.requestIDs[project+"/"+rid]; ok {
		return proto.CloneOf(s.st.ops[k].op), nil
	}
	return nil, nil
}

// remember ties the requestId of r, if any, to the operation it started.
func (s *Server) remember(r *http.Request, rec *opRec) *computepb.Operation {
	if rid := r.URL.Query().Get("requestId"); rid != "" {
		s.st.requestIDs[rec.key.project+"/"+rid] = rec.key
	}
	return proto.CloneOf(rec.op)
}
