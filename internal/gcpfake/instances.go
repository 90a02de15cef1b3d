package gcpfake

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

func (s *Server) insertInstance(r *http.Request) (proto.Message, error) {
	project, zone := r.PathValue("project"), r.PathValue("zone")
	if e := s.checkZone(project, zone); e != nil {
		return nil, e
	}
	in := &computepb.Instance{}
	if e := readBody(r, in); e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if op, e := s.replay(project, r); e != nil || op != nil {
		return opOrError(op, e)
	}
	k := key{project: project, scope: "zones/" + zone, name: in.GetName()}
	b, e := s.buildInstance(k, in)
	if e != nil {
		return nil, e
	}
	if _, ok := s.st.instances[k]; ok {
		return nil, errAlreadyExists(k.path("instances"))
	}
	rec := s.newOp(project, k.scope, "insert", k.link("instances"), b.inst.GetId())
	if rec.fail = s.insertFailure(CallInstancesInsert, r, k, b); rec.fail != nil {
		s.startOp(rec)
		return s.remember(r, rec), nil
	}
	if e := s.allocateInstanceIPs(b.inst); e != nil {
		delete(s.st.ops, rec.key)
		return nil, e
	}
	s.st.instances[k] = &instanceRec{inst: b.inst, booting: true}
	s.bindStatics(b.inst.GetSelfLink(), b.statics)
	s.applyBoot(s.st.instances[k])
	rec.instance = &k
	s.startOp(rec)
	return s.remember(r, rec), nil
}

// insertFailure decides whether an accepted insert fails in its operation:
// an injected fault, the project's quota, or a static IP another instance
// holds. GCE reports all three only in the operation.
func (s *Server) insertFailure(call string, r *http.Request, k key, b *builtInstance) *opFailure {
	if f := s.faults.takeOpFault(call, r, k); f != nil {
		return f
	}
	if f := s.quotaFailure(k, b.cpus); f != nil {
		return f
	}
	for _, ak := range b.statics {
		a := s.st.addresses[ak]
		if a.GetStatus() == "IN_USE" {
			return &opFailure{code: "IP_IN_USE_BY_ANOTHER_RESOURCE", httpStatus: http.StatusBadRequest,
				message: "IP '" + a.GetAddress() + "' is already being used by another resource."}
		}
	}
	return nil
}

func (s *Server) getInstance(r *http.Request) (proto.Message, error) {
	k, e := s.instanceKey(r)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.instances[k] == nil {
		return nil, errNotFound(k.path("instances"))
	}
	s.observeTarget(k.link("instances"))
	s.stepInstance(k)
	rec := s.st.instances[k]
	if rec == nil { // the observation completed a delete
		return nil, errNotFound(k.path("instances"))
	}
	return proto.CloneOf(rec.inst), nil
}

func (s *Server) deleteInstance(r *http.Request) (proto.Message, error) {
	return s.instanceAction(r, "delete", CallInstancesDelete, nil, func(k key, rec *instanceRec, op *opRec) {
		rec.inst.Status = proto.String("STOPPING")
		rec.booting = false
		rec.busy = op.key.name
		op.onDone = func() { s.removeInstance(k) }
	})
}

func (s *Server) stopInstance(r *http.Request) (proto.Message, error) {
	return s.instanceAction(r, "stop", CallInstancesStop, nil, func(k key, rec *instanceRec, op *opRec) {
		if rec.inst.GetStatus() == "TERMINATED" {
			return // stopping a stopped instance succeeds and changes nothing
		}
		rec.inst.Status = proto.String("STOPPING")
		rec.booting = false
		rec.busy = op.key.name
		op.onDone = func() {
			s.terminate(rec)
			rec.busy = ""
		}
	})
}

func (s *Server) startInstance(r *http.Request) (proto.Message, error) {
	return s.instanceAction(r, "start", CallInstancesStart, nil, func(k key, rec *instanceRec, op *opRec) {
		switch rec.inst.GetStatus() {
		case "TERMINATED", "SUSPENDED":
			s.boot(rec, s.cfg.bootProvisioning)
			op.instance = &k
		}
	})
}

// setMetadata replaces the metadata of an instance, as instances.setMetadata
// does: only when the body's fingerprint is the instance's current one (a
// missing or stale one is 412 conditionNotMet), so two callers that read the
// same metadata cannot both write theirs. Like setLabels here, the change is
// visible at once (a new fingerprint, and the guest's metadata server wakes
// its wait_for_change callers); the zone operation completes as others do.
func (s *Server) setMetadata(r *http.Request) (proto.Message, error) {
	in := &computepb.Metadata{}
	if e := readBody(r, in); e != nil {
		return nil, e
	}
	if e := s.checkMetadata("resource", in); e != nil {
		return nil, e
	}
	check := func(rec *instanceRec) *apiError {
		if in.Fingerprint == nil || in.GetFingerprint() != rec.inst.GetMetadata().GetFingerprint() {
			return errMetadataFingerprint()
		}
		return nil
	}
	return s.instanceAction(r, "setMetadata", CallInstancesSetMetadata, check, func(_ key, rec *instanceRec, _ *opRec) {
		md := &computepb.Metadata{Kind: proto.String("compute#metadata"), Items: in.GetItems()}
		md.Fingerprint = proto.String(metadataFingerprint(md))
		rec.inst.Metadata = md
		rec.notify()
	})
}

// setInstanceLabels replaces the labels of an instance, as
// instances.setLabels does: only when labelFingerprint is the instance's
// current one (a missing or stale one is 412 conditionNotMet), so two
// callers that read the same labels cannot both write theirs. The change
// is visible at once, with a new labelFingerprint; the zone operation
// completes as others do.
func (s *Server) setInstanceLabels(r *http.Request) (proto.Message, error) {
	in := &computepb.InstancesSetLabelsRequest{}
	if e := readBody(r, in); e != nil {
		return nil, e
	}
	if e := s.v.checkLabels("resource.labels", in.GetLabels()); e != nil {
		return nil, e
	}
	check := func(rec *instanceRec) *apiError {
		if in.LabelFingerprint == nil || in.GetLabelFingerprint() != rec.inst.GetLabelFingerprint() {
			return errFingerprint()
		}
		return nil
	}
	return s.instanceAction(r, "setLabels", CallInstancesSetLabels, check, func(_ key, rec *instanceRec, _ *opRec) {
		rec.inst.Labels = maps.Clone(in.GetLabels())
		rec.inst.LabelFingerprint = proto.String(labelFingerprint(rec.inst.GetLabels()))
	})
}

// setTags replaces the network tags of an instance, as instances.setTags
// does: only when the body's fingerprint is the instance's current
// tags.fingerprint (a missing or stale one is 412 conditionNotMet). Tags
// are checked as on insert; the change is visible at once, with a new
// fingerprint.
func (s *Server) setTags(r *http.Request) (proto.Message, error) {
	in := &computepb.Tags{}
	if e := readBody(r, in); e != nil {
		return nil, e
	}
	for i, t := range in.GetItems() {
		if e := s.v.checkName(fmt.Sprintf("resource.items[%d]", i), t); e != nil {
			return nil, e
		}
	}
	check := func(rec *instanceRec) *apiError {
		if in.Fingerprint == nil || in.GetFingerprint() != rec.inst.GetTags().GetFingerprint() {
			return errTagsFingerprint()
		}
		return nil
	}
	return s.instanceAction(r, "setTags", CallInstancesSetTags, check, func(_ key, rec *instanceRec, _ *opRec) {
		items := slices.Clone(in.GetItems())
		rec.inst.Tags = &computepb.Tags{Items: items, Fingerprint: proto.String(fingerprint(items...))}
	})
}

// instanceAction runs the common part of delete, stop, start, setLabels,
// setTags and setMetadata: replay, lookup, the busy check, the call's own precondition
// (check, when not nil: a fingerprint), injected operation faults; then
// apply changes the instance and arranges what happens when the operation
// completes.
func (s *Server) instanceAction(r *http.Request, opType, call string, check func(*instanceRec) *apiError, apply func(key, *instanceRec, *opRec)) (proto.Message, error) {
	k, e := s.instanceKey(r)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if op, e := s.replay(k.project, r); e != nil || op != nil {
		return opOrError(op, e)
	}
	rec := s.st.instances[k]
	if rec == nil {
		return nil, errNotFound(k.path("instances"))
	}
	if rec.busy != "" {
		return nil, errNotReady(k.path("instances"))
	}
	if check != nil {
		if e := check(rec); e != nil {
			return nil, e
		}
	}
	op := s.newOp(k.project, k.scope, opType, k.link("instances"), rec.inst.GetId())
	if op.fail = s.faults.takeOpFault(call, r, k); op.fail == nil {
		apply(k, rec, op)
	}
	s.startOp(op)
	return s.remember(r, op), nil
}

func (s *Server) listInstances(r *http.Request) (proto.Message, error) {
	project, zone := r.PathValue("project"), r.PathValue("zone")
	if e := s.checkZone(project, zone); e != nil {
		return nil, e
	}
	q, e := parseListQuery(r)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	// A list observes every instance of the zone as a GET would: a booting
	// one moves on, a pending delete may complete. On GCE time does that; a
	// client that polls by listing must see it as one that polls by GETs.
	for k := range s.st.instances {
		if k.project == project && k.scope == "zones/"+zone {
			s.observeTarget(k.link("instances"))
			s.stepInstance(k)
		}
	}
	items := s.instancesIn(project, func(k key) bool { return k.scope == "zones/"+zone })
	s.mu.Unlock()
	page, next, e := filterAndPage(items, q)
	if e != nil {
		return nil, e
	}
	return &computepb.InstanceList{
		Kind:          proto.String("compute#instanceList"),
		Id:            proto.String("projects/" + project + "/zones/" + zone + "/instances"),
		Items:         page,
		SelfLink:      proto.String(scopeLink(project, "zones/"+zone) + "/instances"),
		NextPageToken: optional(next),
	}, nil
}

// instancesIn returns clones of the project's instances in scopes keep
// accepts, sorted by zone and name. The caller holds s.mu.
func (s *Server) instancesIn(project string, keep func(key) bool) []*computepb.Instance {
	return snapshot(s.st.instances, func(k key) bool { return k.project == project && keep(k) }, instanceOf)
}

func (s *Server) instanceKey(r *http.Request) (key, *apiError) {
	project, zone := r.PathValue("project"), r.PathValue("zone")
	if e := s.checkZone(project, zone); e != nil {
		return key{}, e
	}
	return key{project: project, scope: "zones/" + zone, name: r.PathValue("name")}, nil
}

func zoneOfKey(k key) string { return strings.TrimPrefix(k.scope, "zones/") }
