package gcpfake

import (
	"encoding/json"
	"net/http"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

func (s *Server) insertFirewall(r *http.Request) (proto.Message, error) {
	project := r.PathValue("project")
	if e := s.checkProject(project); e != nil {
		return nil, e
	}
	in := &computepb.Firewall{}
	if e := readBody(r, in); e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if op, e := s.replay(project, r); e != nil || op != nil {
		return opOrError(op, e)
	}
	k := key{project: project, scope: "global", name: in.GetName()}
	fw := proto.CloneOf(in)
	if e := s.normalizeFirewall(project, fw); e != nil {
		return nil, e
	}
	if _, ok := s.st.firewalls[k]; ok {
		return nil, errAlreadyExists(k.path("firewalls"))
	}
	fw.Kind = proto.String("compute#firewall")
	fw.Id = proto.Uint64(s.st.newID())
	fw.CreationTimestamp = proto.String(timestamp(s.cfg.clock()))
	fw.SelfLink = proto.String(k.link("firewalls"))
	rec := s.newOp(project, k.scope, "insert", k.link("firewalls"), fw.GetId())
	if rec.fail = s.faults.takeOpFault(CallFirewallsInsert, r, k); rec.fail == nil {
		s.st.firewalls[k] = fw
	}
	s.startOp(rec)
	return s.remember(r, rec), nil
}

// patchFirewall applies JSON merge-patch semantics at the top level, as GCE
// documents for firewalls.patch: every field present in the body replaces
// the stored one, absent fields are kept. Lists are replaced, not merged.
func (s *Server) patchFirewall(r *http.Request) (proto.Message, error) {
	k, e := s.firewallKey(r)
	if e != nil {
		return nil, e
	}
	in := &computepb.Firewall{}
	raw, e := readBodyRaw(r, in)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if op, e := s.replay(k.project, r); e != nil || op != nil {
		return opOrError(op, e)
	}
	cur := s.st.firewalls[k]
	if cur == nil {
		return nil, errNotFound(k.path("firewalls"))
	}
	if in.Name != nil && in.GetName() != k.name {
		return nil, errInvalid("resource.name", in.GetName(), "The name in the body must match the name in the URL.")
	}
	merged, e := mergeTopLevel(cur, in, raw)
	if e != nil {
		return nil, e
	}
	if e := s.normalizeFirewall(k.project, merged); e != nil {
		return nil, e
	}
	rec := s.newOp(k.project, k.scope, "patch", k.link("firewalls"), cur.GetId())
	if rec.fail = s.faults.takeOpFault(CallFirewallsPatch, r, k); rec.fail == nil {
		s.st.firewalls[k] = merged
	}
	s.startOp(rec)
	return s.remember(r, rec), nil
}

// mergeTopLevel copies into a clone of cur every field whose JSON name is a
// key of the patch body; the body was already decoded strictly into patch.
func mergeTopLevel(cur, patch *computepb.Firewall, raw []byte) (*computepb.Firewall, *apiError) {
	var present map[string]json.RawMessage
	if json.Unmarshal(raw, &present) != nil {
		return nil, &apiError{Code: http.StatusBadRequest, Reason: ReasonInvalid, Message: "Invalid JSON payload received."}
	}
	out := proto.CloneOf(cur)
	dst, src := out.ProtoReflect(), patch.ProtoReflect()
	fields := dst.Descriptor().Fields()
	for name := range present {
		fd := fields.ByJSONName(name)
		switch {
		case fd == nil:
			continue
		case name == "id" || name == "selfLink" || name == "kind" || name == "creationTimestamp":
			continue // output only
		case src.Has(fd):
			dst.Set(fd, src.Get(fd))
		default:
			dst.Clear(fd) // an explicit null or empty value clears the field
		}
	}
	return out, nil
}

func (s *Server) getFirewall(r *http.Request) (proto.Message, error) {
	k, e := s.firewallKey(r)
	return getStored(s, s.st.firewalls, "firewalls", k, e)
}

func (s *Server) deleteFirewall(r *http.Request) (proto.Message, error) {
	k, e := s.firewallKey(r)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if op, e := s.replay(k.project, r); e != nil || op != nil {
		return opOrError(op, e)
	}
	fw := s.st.firewalls[k]
	if fw == nil {
		return nil, errNotFound(k.path("firewalls"))
	}
	rec := s.newOp(k.project, k.scope, "delete", k.link("firewalls"), fw.GetId())
	if rec.fail = s.faults.takeOpFault(CallFirewallsDelete, r, k); rec.fail == nil {
		delete(s.st.firewalls, k)
	}
	s.startOp(rec)
	return s.remember(r, rec), nil
}

func (s *Server) listFirewalls(r *http.Request) (proto.Message, error) {
	project := r.PathValue("project")
	if e := s.checkProject(project); e != nil {
		return nil, e
	}
	q, e := parseListQuery(r)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	items := snapshot(s.st.firewalls, func(k key) bool { return k.project == project }, stored[*computepb.Firewall])
	s.mu.Unlock()
	page, next, e := filterAndPage(items, q)
	if e != nil {
		return nil, e
	}
	return &computepb.FirewallList{
		Kind:          proto.String("compute#firewallList"),
		Id:            proto.String("projects/" + project + "/global/firewalls"),
		Items:         page,
		SelfLink:      proto.String(scopeLink(project, "global/firewalls")),
		NextPageToken: optional(next),
	}, nil
}

func (s *Server) firewallKey(r *http.Request) (key, *apiError) {
	project := r.PathValue("project")
	if e := s.checkProject(project); e != nil {
		return key{}, e
	}
	return key{project: project, scope: "global", name: r.PathValue("name")}, nil
}
