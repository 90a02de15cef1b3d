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
	return snapshot(s.st.instances, func(r *instanceRec) *computepb.Instance { return r.inst })
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
	return snapshot(s.st.addresses, func(a *computepb.Address) *computepb.Address { return a })
}

// Firewalls returns copies of every firewall, sorted by project and name.
func (s *Server) Firewalls() []*computepb.Firewall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return snapshot(s.st.firewalls, func(f *computepb.Firewall) *computepb.Firewall { return f })
}

// Operations returns copies of every operation, sorted by project, scope
// and name (names start with the creation time in milliseconds).
func (s *Server) Operations() []*computepb.Operation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return snapshot(s.st.ops, func(o *opRec) *computepb.Operation { return o.op })
}

func snapshot[V any, M proto.Message](m map[key]V, get func(V) M) []M {
	keys := make([]key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortKeys(keys)
	out := make([]M, 0, len(keys))
	for _, k := range keys {
		out = append(out, proto.CloneOf(get(m[k])))
	}
	return out
}
