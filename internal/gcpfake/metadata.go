package gcpfake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

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
//	GET              instance/attributes/            keys of the instance metadata, one a line;
//	                                                 with ?recursive=true a JSON object of them all
//	GET              instance/attributes/{key}       a metadata value
//	GET              instance/name, instance/id, instance/zone, project/project-id
//	GET, PUT, DELETE instance/guest-attributes/{namespace}/{key}
//
// Both attribute paths answer with an ETag header (a hash of what they
// serve) and take GCE's long poll: with ?wait_for_change=true the answer
// comes at once when last_etag is given and is not the current ETag, and
// otherwise when the content changes (a setMetadata), timeout_sec passes
// (then the unchanged content, 200), the caller goes away, or the server
// stops (503). A key that does not exist is 404 at once.
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
	msgMetadataTimeout       = "Invalid timeout_sec.\n"
	msgMetadataStopping      = "The metadata server is stopping.\n"
	maxGuestValue            = 1 << 20
)

// serveAttributes serves instance/attributes/ (attr "") or one attribute,
// with GCE's ETag and wait_for_change.
func (s *Server) serveAttributes(w http.ResponseWriter, r *http.Request, k key, attr string) {
	q := r.URL.Query()
	wait := strings.EqualFold(q.Get("wait_for_change"), "true")
	recursive := strings.EqualFold(q.Get("recursive"), "true")
	var timeout <-chan time.Time
	if v := q.Get("timeout_sec"); wait && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			metadataError(w, http.StatusBadRequest, msgMetadataTimeout)
			return
		}
		t := time.NewTimer(time.Duration(n) * time.Second)
		defer t.Stop()
		timeout = t.C
	}
	// Without last_etag GCE waits for the next change from now.
	last := q.Get("last_etag")
	for {
		s.mu.Lock()
		var body, etag string
		ok := false
		rec := s.st.instances[k]
		if rec != nil {
			body, etag, ok = attributes(rec.inst.GetMetadata(), attr, recursive)
		}
		if last == "" {
			last = etag
		}
		var changed <-chan struct{}
		if ok && wait && etag == last {
			changed = rec.watch()
			s.waiters++
		}
		s.mu.Unlock()
		if !ok {
			metadataError(w, http.StatusNotFound, msgMetadataNotFound)
			return
		}
		if changed == nil {
			w.Header().Set("ETag", etag)
			if recursive && attr == "" {
				w.Header().Set("Content-Type", "application/json")
			}
			_, _ = io.WriteString(w, body)
			return
		}
		done := s.waitChange(r.Context(), changed, timeout)
		s.mu.Lock()
		s.waiters--
		s.mu.Unlock()
		switch done {
		case waitChanged: // look again: the content may be the same
		case waitTimeout:
			wait = false
		case waitGone:
			return // nobody reads the answer
		case waitStopping:
			metadataError(w, http.StatusServiceUnavailable, msgMetadataStopping)
			return
		}
	}
}

type waitEnd int

const (
	waitChanged waitEnd = iota
	waitTimeout
	waitGone
	waitStopping
)

// waitChange blocks until the instance's metadata changes, the timeout
// passes, the caller goes away or the server stops.
func (s *Server) waitChange(ctx context.Context, changed <-chan struct{}, timeout <-chan time.Time) waitEnd {
	select {
	case <-changed:
		return waitChanged
	case <-timeout:
		return waitTimeout
	case <-ctx.Done():
		return waitGone
	case <-s.closing:
		return waitStopping
	}
}

// attributes returns what instance/attributes/ (attr "") or one attribute
// serves, and its ETag; false when attr is not a key of md.
func attributes(md *computepb.Metadata, attr string, recursive bool) (body, etag string, ok bool) {
	items := map[string]string{}
	for _, it := range md.GetItems() {
		items[it.GetKey()] = it.GetValue()
	}
	if attr != "" {
		v, ok := items[attr]
		return v, metadataETag(v), ok
	}
	keys := make([]string, 0, len(items))
	for k := range items {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		parts = append(parts, k, items[k])
	}
	etag = metadataETag(parts...)
	if recursive {
		b, _ := json.Marshal(items) // sorted keys; strings always marshal
		return string(b), etag, true
	}
	for i := range keys {
		keys[i] += "\n"
	}
	return strings.Join(keys, ""), etag, true
}

// metadataETag is what GCE's ETags look like: 16 hex digits, a hash of the
// content, so equal content has equal ETags.
func metadataETag(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:8])
}

// MetadataServer returns the metadata server the guest of one instance
// sees. It reads the instance at every request, so it follows the instance
// (and answers 404 while there is none).
func (s *Server) MetadataServer(project, zone, name string) http.Handler {
	k := key{project: project, scope: "zones/" + zone, name: name}
	m := http.NewServeMux()
	const v1 = "/computeMetadata/v1/"
	m.HandleFunc("GET "+v1+"instance/attributes/{$}", func(w http.ResponseWriter, r *http.Request) {
		s.serveAttributes(w, r, k, "")
	})
	m.HandleFunc("GET "+v1+"instance/attributes/{key}", func(w http.ResponseWriter, r *http.Request) {
		s.serveAttributes(w, r, k, r.PathValue("key"))
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
