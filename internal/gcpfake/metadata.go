package gcpfake

import (
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// The metadata server a VM reaches at http://metadata.google.internal
// (169.254.169.254). Like GCE's it serves only requests with
// "Metadata-Flavor: Google", refuses requests carrying X-Forwarded-For (a
// request some proxy relayed), and answers with "Metadata-Flavor: Google".
//
// Served, under /computeMetadata/v1/:
//
//	GET              instance/attributes/            keys of the instance metadata, one a line
//	GET              instance/attributes/{key}       a metadata value
//	GET              instance/name, instance/id, instance/zone, project/project-id
//	GET, PUT, DELETE instance/guest-attributes/{namespace}/{key}
//
// Guest attributes need enable-guest-attributes=TRUE in the instance
// metadata; without it they are 403. instance/zone names the project by ID,
// where GCE names it by number. Everything else is 404.

const metadataFlavor = "Metadata-Flavor"

// Bodies of the metadata server's refusals.
const (
	msgMetadataNoFlavor      = "Missing Metadata-Flavor:Google header.\n"
	msgMetadataForwarded     = "Request denied: X-Forwarded-For header present.\n"
	msgMetadataGuestDisabled = "Guest attributes endpoint access is disabled.\n"
	msgMetadataNotFound      = "Not found.\n"
	maxGuestValue            = 1 << 20
)

// MetadataServer returns the metadata server the guest of one instance
// sees. It reads the instance at every request, so it follows the instance
// (and answers 404 while there is none).
func (s *Server) MetadataServer(project, zone, name string) http.Handler {
	k := key{project: project, scope: "zones/" + zone, name: name}
	m := http.NewServeMux()
	const v1 = "/computeMetadata/v1/"
	m.HandleFunc("GET "+v1+"instance/attributes/{$}", func(w http.ResponseWriter, _ *http.Request) {
		inst := s.instanceCopy(k)
		if inst == nil {
			metadataError(w, http.StatusNotFound, msgMetadataNotFound)
			return
		}
		keys := make([]string, 0, len(inst.GetMetadata().GetItems()))
		for _, it := range inst.GetMetadata().GetItems() {
			keys = append(keys, it.GetKey()+"\n")
		}
		sort.Strings(keys)
		_, _ = io.WriteString(w, strings.Join(keys, ""))
	})
	m.HandleFunc("GET "+v1+"instance/attributes/{key}", func(w http.ResponseWriter, r *http.Request) {
		for _, it := range s.instanceCopy(k).GetMetadata().GetItems() {
			if it.GetKey() == r.PathValue("key") {
				_, _ = io.WriteString(w, it.GetValue())
				return
			}
		}
		metadataError(w, http.StatusNotFound, msgMetadataNotFound)
	})
	fixed := map[string]func() string{
		"instance/name":      func() string { return name },
		"instance/zone":      func() string { return "projects/" + project + "/zones/" + zone },
		"project/project-id": func() string { return project },
		"instance/id": func() string {
			return strconv.FormatUint(s.instanceCopy(k).GetId(), 10)
		},
	}
	for p, fn := range fixed {
		m.HandleFunc("GET "+v1+p, func(w http.ResponseWriter, _ *http.Request) {
			if s.instanceCopy(k) == nil {
				metadataError(w, http.StatusNotFound, msgMetadataNotFound)
				return
			}
			_, _ = io.WriteString(w, fn())
		})
	}
	m.HandleFunc(v1+"instance/guest-attributes/{ns}/{key}", func(w http.ResponseWriter, r *http.Request) {
		s.serveGuestAttribute(w, r, project, zone, name)
	})
	m.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		metadataError(w, http.StatusNotFound, msgMetadataNotFound)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(metadataFlavor, "Google")
		w.Header().Set("Content-Type", "application/text")
		switch {
		case len(r.Header.Values("X-Forwarded-For")) > 0:
			metadataError(w, http.StatusForbidden, msgMetadataForwarded)
		case r.Header.Get(metadataFlavor) != "Google":
			metadataError(w, http.StatusForbidden, msgMetadataNoFlavor)
		default:
			m.ServeHTTP(w, r)
		}
	})
}

// serveGuestAttribute reads, writes or deletes one guest attribute.
func (s *Server) serveGuestAttribute(w http.ResponseWriter, r *http.Request, project, zone, name string) {
	path := r.PathValue("ns") + "/" + r.PathValue("key")
	inst := s.instanceCopy(key{project: project, scope: "zones/" + zone, name: name})
	switch {
	case inst == nil:
		metadataError(w, http.StatusNotFound, msgMetadataNotFound)
		return
	case !guestAttributesEnabled(inst):
		metadataError(w, http.StatusForbidden, msgMetadataGuestDisabled)
		return
	}
	var err error
	switch r.Method {
	case http.MethodGet:
		v, ok := s.GuestAttribute(project, zone, name, path)
		if !ok {
			metadataError(w, http.StatusNotFound, msgMetadataNotFound)
			return
		}
		_, _ = io.WriteString(w, v)
		return
	case http.MethodPut:
		var b []byte
		if b, err = io.ReadAll(io.LimitReader(r.Body, maxGuestValue+1)); err == nil && len(b) > maxGuestValue {
			metadataError(w, http.StatusRequestEntityTooLarge, "Value too large.\n")
			return
		}
		if err == nil {
			err = s.SetGuestAttribute(project, zone, name, path, string(b))
		}
	case http.MethodDelete:
		err = s.DeleteGuestAttribute(project, zone, name, path)
	default:
		metadataError(w, http.StatusMethodNotAllowed, "Method not allowed.\n")
		return
	}
	if err != nil {
		metadataError(w, http.StatusBadRequest, err.Error()+"\n")
	}
}

// instanceCopy returns a copy of the instance, or nil.
func (s *Server) instanceCopy(k key) *computepb.Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec := s.st.instances[k]; rec != nil {
		return proto.CloneOf(rec.inst)
	}
	return nil
}

func metadataError(w http.ResponseWriter, code int, body string) {
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}
