package gcpfake

import (
	"maps"
	"net/http"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

func (s *Server) insertAddress(r *http.Request) (proto.Message, error) {
	project, region := r.PathValue("project"), r.PathValue("region")
	if e := s.checkRegion(project, region); e != nil {
		return nil, e
	}
	in := &computepb.Address{}
	if e := readBody(r, in); e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if op, e := s.replay(project, r); e != nil || op != nil {
		return opOrError(op, e)
	}
	k := key{project: project, scope: "regions/" + region, name: in.GetName()}
	a, e := s.buildAddress(k, in)
	if e != nil {
		return nil, e
	}
	if _, ok := s.st.addresses[k]; ok {
		return nil, errAlreadyExists(k.path("addresses"))
	}
	rec := s.newOp(project, k.scope, "insert", k.link("addresses"), a.GetId())
	if rec.fail = s.faults.takeOpFault(CallAddressesInsert, r, k); rec.fail == nil {
		if e := s.allocateAddress(a); e != nil {
			delete(s.st.ops, rec.key)
			return nil, e
		}
		s.st.addresses[k] = a
		rec.onDone = func() {
			if a.GetStatus() == "RESERVING" {
				a.Status = proto.String("RESERVED")
			}
		}
	}
	s.startOp(rec)
	return s.remember(r, rec), nil
}

func (s *Server) buildAddress(k key, in *computepb.Address) (*computepb.Address, *apiError) {
	if e := s.v.checkName("resource.name", in.GetName()); e != nil {
		return nil, e
	}
	if e := s.v.checkLabels("resource.labels", in.GetLabels()); e != nil {
		return nil, e
	}
	if ip := in.GetAddress(); ip != "" {
		if e := checkIPv4("resource.address", ip); e != nil {
			return nil, e
		}
	}
	a := proto.CloneOf(in)
	setDefault(&a.AddressType, "EXTERNAL")
	switch a.GetAddressType() {
	case "EXTERNAL":
		setDefault(&a.NetworkTier, "PREMIUM")
	case "INTERNAL":
	default:
		return nil, errInvalid("resource.addressType", a.GetAddressType(), "Must be EXTERNAL or INTERNAL.")
	}
	setDefault(&a.IpVersion, "IPV4")
	a.Kind = proto.String("compute#address")
	a.Id = proto.Uint64(s.st.newID())
	a.CreationTimestamp = proto.String(timestamp(s.cfg.clock()))
	a.SelfLink = proto.String(k.link("addresses"))
	a.Region = proto.String(scopeLink(k.project, k.scope))
	a.Status = proto.String("RESERVING")
	a.Users = nil
	a.LabelFingerprint = proto.String(labelFingerprint(a.GetLabels()))
	return a, nil
}

// allocateAddress picks the IP of a new address: the one asked for, or the
// lowest free one of the fake's static (external) or internal range.
func (s *Server) allocateAddress(a *computepb.Address) *apiError {
	pool := s.st.static
	if a.GetAddressType() == "INTERNAL" {
		pool = s.st.internal
	}
	if ip := a.GetAddress(); ip != "" {
		pool.mark(ip)
		return nil
	}
	ip, ok := pool.take()
	if !ok {
		return &apiError{Code: http.StatusForbidden, Reason: ReasonQuotaExceeded,
			Message: "Quota 'STATIC_ADDRESSES' exceeded.  Limit: 253.0 in region " + lastSegment(a.GetRegion()) + "."}
	}
	a.Address = proto.String(ip)
	return nil
}

// addressByIP finds the reserved external address with this IP in a region.
func (s *Server) addressByIP(project, region, ip string) (key, bool) {
	for k, a := range s.st.addresses {
		if k.project == project && k.scope == "regions/"+region && a.GetAddress() == ip && a.GetAddressType() == "EXTERNAL" {
			return k, true
		}
	}
	return key{}, false
}

func (s *Server) getAddress(r *http.Request) (proto.Message, error) {
	k, e := s.addressKey(r)
	return getStored(s, s.st.addresses, "addresses", k, e)
}

func (s *Server) deleteAddress(r *http.Request) (proto.Message, error) {
	k, e := s.addressKey(r)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if op, e := s.replay(k.project, r); e != nil || op != nil {
		return opOrError(op, e)
	}
	a := s.st.addresses[k]
	if a == nil {
		return nil, errNotFound(k.path("addresses"))
	}
	if s.cfg.strictAddressDelete && a.GetStatus() == "IN_USE" {
		return nil, errInUse(k.path("addresses"), strings.Join(a.GetUsers(), ","))
	}
	rec := s.newOp(k.project, k.scope, "delete", k.link("addresses"), a.GetId())
	if rec.fail = s.faults.takeOpFault(CallAddressesDelete, r, k); rec.fail == nil {
		// Released at once: an address has no visible "releasing" state.
		delete(s.st.addresses, k)
		if a.GetAddressType() == "INTERNAL" {
			s.st.internal.release(a.GetAddress())
		} else {
			s.st.static.release(a.GetAddress())
		}
	}
	s.startOp(rec)
	return s.remember(r, rec), nil
}

// setAddressLabels replaces the labels of an address, as
// addresses.setLabels does: only when labelFingerprint is the address's
// current one (412 conditionNotMet otherwise), so two callers that read the
// same labels cannot both write theirs. Labels survive every status change
// (RESERVED, IN_USE and back).
func (s *Server) setAddressLabels(r *http.Request) (proto.Message, error) {
	k, e := s.addressKey(r)
	if e != nil {
		return nil, e
	}
	in := &computepb.RegionSetLabelsRequest{}
	if e := readBody(r, in); e != nil {
		return nil, e
	}
	if in.LabelFingerprint == nil {
		return nil, errRequired("resource.labelFingerprint")
	}
	if e := s.v.checkLabels("resource.labels", in.GetLabels()); e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if op, e := s.replay(k.project, r); e != nil || op != nil {
		return opOrError(op, e)
	}
	a := s.st.addresses[k]
	if a == nil {
		return nil, errNotFound(k.path("addresses"))
	}
	if in.GetLabelFingerprint() != a.GetLabelFingerprint() {
		return nil, errFingerprint()
	}
	rec := s.newOp(k.project, k.scope, "setLabels", k.link("addresses"), a.GetId())
	if rec.fail = s.faults.takeOpFault(CallAddressesSetLabels, r, k); rec.fail == nil {
		a.Labels = maps.Clone(in.GetLabels())
		a.LabelFingerprint = proto.String(labelFingerprint(a.GetLabels()))
	}
	s.startOp(rec)
	return s.remember(r, rec), nil
}

func (s *Server) listAddresses(r *http.Request) (proto.Message, error) {
	project, region := r.PathValue("project"), r.PathValue("region")
	if e := s.checkRegion(project, region); e != nil {
		return nil, e
	}
	q, e := parseListQuery(r)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	items := snapshot(s.st.addresses, func(k key) bool { return k.project == project && k.scope == "regions/"+region }, stored[*computepb.Address])
	s.mu.Unlock()
	page, next, e := filterAndPage(items, q)
	if e != nil {
		return nil, e
	}
	return &computepb.AddressList{
		Kind:          proto.String("compute#addressList"),
		Id:            proto.String("projects/" + project + "/regions/" + region + "/addresses"),
		Items:         page,
		SelfLink:      proto.String(scopeLink(project, "regions/"+region) + "/addresses"),
		NextPageToken: optional(next),
	}, nil
}

func (s *Server) addressKey(r *http.Request) (key, *apiError) {
	project, region := r.PathValue("project"), r.PathValue("region")
	if e := s.checkRegion(project, region); e != nil {
		return key{}, e
	}
	return key{project: project, scope: "regions/" + region, name: r.PathValue("name")}, nil
}
