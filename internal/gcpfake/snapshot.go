package gcpfake

import (
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// Instances returns copies of every instance in every project, sorted by
// project, zone and name. Reading them observes nothing: statuses stay put.
func (s *Server) Instances() []*computepb.Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return snapshot(s.st.instances, nil, instanceOf)
}

// Instance returns a copy of one instance, if it exists.
func (s *Server) Instance(project, zone, name string) (*computepb.Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.st.instances[key{project: project, scope: "zones/" + zone, name: name}]
	if rec == nil {
		return nil, false
	}
	return proto.CloneOf(rec.inst), true
}

// Addresses returns copies of every address, sorted by project, region and
// name.
func (s *Server) Addresses() []*computepb.Address {
	s.mu.Lock()
	defer s.mu.Unlock()
	return snapshot(s.st.addresses, nil, stored[*computepb.Address])
}

// Firewalls returns copies of every firewall, sorted by project and name.
func (s *Server) Firewalls() []*computepb.Firewall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return snapshot(s.st.firewalls, nil, stored[*computepb.Firewall])
}

// Operations returns copies of every operation, sorted by project, scope
// and name (names start with the creation time in milliseconds).
func (s *Server) Operations() []*computepb.Operation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return snapshot(s.st.ops, nil, func(o *opRec) *computepb.Operation { return o.op })
}

// snapshot returns clones of the objects of m (get reads one from what m
// holds) whose keys keep accepts, every one when keep is nil, sorted by
// project, scope and name. The caller holds s.mu.
func snapshot[V any, M proto.Message](m map[key]V, keep func(key) bool, get func(V) M) []M {
	keys := make([]key, 0, len(m))
	for k := range m {
		if keep == nil || keep(k) {
			keys = append(keys, k)
		}
	}
	sortKeys(keys)
	out := make([]M, 0, len(keys))
	for _, k := range keys {
		out = append(out, proto.CloneOf(get(m[k])))
	}
	return out
}

// stored is the get of snapshot for a map of the objects themselves.
func stored[M proto.Message](m M) M { return m }

// instanceOf is the get of snapshot for the instances.
func instanceOf(r *instanceRec) *computepb.Instance { return r.inst }

// getStored answers the get of the object at k (if e, the request's key,
// is nil) of collection coll, stored in m: a clone of it, which the get
// observes as a poll does, or not found.
func getStored[M proto.Message](s *Server, m map[key]M, coll string, k key, e *apiError) (proto.Message, error) {
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := m[k]
	if !ok {
		return nil, errNotFound(k.path(coll))
	}
	s.observeTarget(k.link(coll))
	return proto.CloneOf(o), nil
}
