package gcpfake

import (
	"net/http"
	"regexp"
	"sort"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"google.golang.org/protobuf/proto"
)

// Guest attributes are key/value pairs a VM writes to its metadata server
// (PUT instance/guest-attributes/<namespace>/<key>) and clients read with
// instances.getGuestAttributes. The metadata server accepts writes only
// when the instance's metadata has enable-guest-attributes=TRUE.

// MetadataEnableGuestAttributes is the metadata key that lets the guest
// write guest attributes.
const MetadataEnableGuestAttributes = "enable-guest-attributes"

const (
	errFmtGuestDisabled = "instance projects/%s/zones/%s/instances/%s does not have %s=TRUE in its metadata"
	errFmtGuestName     = "guest attribute %q: namespace and key must be non-empty and hold only letters, digits, '_' and '-'"
)

// guestNameRE matches a guest attribute namespace or key.
var guestNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// guestAttributesEnabled reports whether inst lets its guest write guest
// attributes. GCE reads the value case-insensitively.
func guestAttributesEnabled(inst *computepb.Instance) bool {
	for _, it := range inst.GetMetadata().GetItems() {
		if it.GetKey() == MetadataEnableGuestAttributes {
			return strings.EqualFold(it.GetValue(), "true")
		}
	}
	return false
}

// splitGuestPath splits "namespace/key" and checks both names.
func splitGuestPath(p string) (string, string, bool) {
	ns, k, ok := strings.Cut(p, "/")
	return ns, k, ok && guestNameRE.MatchString(ns) && guestNameRE.MatchString(k)
}

// getGuestAttributes serves instances.getGuestAttributes: variableKey
// "ns/key" returns that value in variableValue; queryPath "" or "/" returns
// every attribute, "ns/" (or "ns") a namespace and "ns/key" one attribute,
// as queryValue.items. Nothing found is 404 notFound, as on GCE.
func (s *Server) getGuestAttributes(r *http.Request) (proto.Message, error) {
	k, e := s.instanceKey(r)
	if e != nil {
		return nil, e
	}
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.st.instances[k]
	if rec == nil {
		return nil, errNotFound(k.path("instances"))
	}
	out := &computepb.GuestAttributes{Kind: proto.String("compute#guestAttributes")}
	if q.Has("variableKey") {
		vk := q.Get("variableKey")
		v, ok := rec.guest[vk]
		if !ok {
			return nil, errNotFound(k.path("instances") + "/guestAttributes/" + vk)
		}
		out.VariableKey, out.VariableValue = proto.String(vk), proto.String(v)
		return out, nil
	}
	qp := q.Get("queryPath")
	ns, key, _ := strings.Cut(strings.TrimPrefix(qp, "/"), "/")
	var items []*computepb.GuestAttributesEntry
	for p, v := range rec.guest {
		pns, pkey, _ := strings.Cut(p, "/")
		if (ns == "" || ns == pns) && (key == "" || key == pkey) {
			items = append(items, &computepb.GuestAttributesEntry{Namespace: proto.String(pns), Key: proto.String(pkey), Value: proto.String(v)})
		}
	}
	if len(items) == 0 {
		return nil, errNotFound(k.path("instances") + "/guestAttributes/" + qp)
	}
	sort.Slice(items, func(i, j int) bool {
		if items[i].GetNamespace() != items[j].GetNamespace() {
			return items[i].GetNamespace() < items[j].GetNamespace()
		}
		return items[i].GetKey() < items[j].GetKey()
	})
	out.QueryPath, out.QueryValue = proto.String(qp), &computepb.GuestAttributesValue{Items: items}
	return out, nil
}

// SetGuestAttribute writes a guest attribute ("namespace/key") as the
// instance's guest would through its metadata server: only when the
// instance has enable-guest-attributes=TRUE.
func (s *Server) SetGuestAttribute(project, zone, name, path, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.guestRec(project, zone, name, path)
	if err != nil {
		return err
	}
	if rec.guest == nil {
		rec.guest = map[string]string{}
	}
	rec.guest[path] = value
	return nil
}

// DeleteGuestAttribute removes a guest attribute, as the guest would.
// Removing one that does not exist succeeds.
func (s *Server) DeleteGuestAttribute(project, zone, name, path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.guestRec(project, zone, name, path)
	if err != nil {
		return err
	}
	delete(rec.guest, path)
	return nil
}

// GuestAttribute returns a guest attribute, if the guest wrote it.
func (s *Server) GuestAttribute(project, zone, name, path string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.st.instances[key{project: project, scope: "zones/" + zone, name: name}]
	if rec == nil {
		return "", false
	}
	v, ok := rec.guest[path]
	return v, ok
}

// guestRec returns the instance whose guest may write path. The caller
// holds s.mu.
func (s *Server) guestRec(project, zone, name, path string) (*instanceRec, error) {
	if _, _, ok := splitGuestPath(path); !ok {
		return nil, errors.Errorf(errFmtGuestName, path)
	}
	rec := s.st.instances[key{project: project, scope: "zones/" + zone, name: name}]
	if rec == nil {
		return nil, errors.Errorf(errFmtNoInstance, project, zone, name)
	}
	if !guestAttributesEnabled(rec.inst) {
		return nil, errors.Errorf(errFmtGuestDisabled, project, zone, name, MetadataEnableGuestAttributes)
	}
	return rec, nil
}
