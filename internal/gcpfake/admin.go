package gcpfake

import (
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// The admin API lets a process outside the test (a dev environment, an e2e
// suite) drive the same knobs as the Go API. It is never counted, faulted or
// authenticated. Durations are Go duration strings ("250ms", "2s").
//
//	GET    /_fake/healthz
//	GET    /_fake/calls                  -> {"compute.instances.insert": 2, ...}
//	DELETE /_fake/calls                  reset the counters
//	GET    /_fake/state                  -> {"instances":[...],"addresses":[...],"firewalls":[...],"operations":[...]}
//	POST   /_fake/faults/error           {"match":{"call":"compute.instances.insert","method":"","path":""},"code":403,"reason":"rateLimitExceeded","message":"","times":2,"for":"10s"}
//	POST   /_fake/faults/operation       {"match":{...},"code":"QUOTA_EXCEEDED","message":"","httpStatus":403,"times":1}
//	POST   /_fake/faults/latency         {"match":{...},"delay":"200ms","times":0}
//	POST   /_fake/faults/storm           {"for":"5s","times":0}
//	DELETE /_fake/faults                 clear every fault and quota
//	PUT    /_fake/quotas/{project}       {"instances":2,"cpus":8}
//	PUT    /_fake/operation-polls        {"polls":3}
//	PUT    /_fake/instances/{project}/{zone}/{name}/status   {"status":"TERMINATED"}
//	PUT    /_fake/instances/{project}/{zone}/{name}/guest-attributes/{ns}/{key}   body: the value, as the guest writes it
//	DELETE /_fake/instances/{project}/{zone}/{name}/guest-attributes/{ns}/{key}
//	ANY    /_fake/metadata/{project}/{zone}/{name}/computeMetadata/v1/...   the instance's metadata server (MetadataServer)
//	POST   /_fake/keys?email=E           -> a service-account JSON key the token endpoint trusts
//	POST   /_fake/tokens                 {"token":"T"}: accept T as a bearer token

const errFmtDuration = "cannot parse duration %q"

type wireErrorFault struct {
	Match   Match  `json:"match"`
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Times   int    `json:"times"`
	For     string `json:"for"`
}

type wireOpFault struct {
	Match      Match  `json:"match"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	HTTPStatus int    `json:"httpStatus"`
	Times      int    `json:"times"`
}

type wireLatency struct {
	Match Match  `json:"match"`
	Delay string `json:"delay"`
	Times int    `json:"times"`
}

func (s *Server) adminHandler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /_fake/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	m.HandleFunc("GET /_fake/calls", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.CallCounts()) })
	m.HandleFunc("DELETE /_fake/calls", func(w http.ResponseWriter, _ *http.Request) { s.ResetCalls() })
	m.HandleFunc("GET /_fake/state", s.adminState)
	s.adminFaults(m)
	m.HandleFunc("PUT /_fake/operation-polls", admin(func(p struct {
		Polls int `json:"polls"`
	}) error {
		s.SetOperationPolls(p.Polls)
		return nil
	}))
	m.HandleFunc("PUT /_fake/instances/{project}/{zone}/{name}/status", func(w http.ResponseWriter, r *http.Request) {
		admin(func(st struct {
			Status string `json:"status"`
		}) error {
			return s.SetInstanceStatus(r.PathValue("project"), r.PathValue("zone"), r.PathValue("name"), st.Status)
		})(w, r)
	})
	s.adminGuest(m)
	m.HandleFunc("POST /_fake/keys", func(w http.ResponseWriter, r *http.Request) {
		b, err := s.NewServiceAccountKey(r.URL.Query().Get("email"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	m.HandleFunc("POST /_fake/tokens", admin(func(t struct {
		Token string `json:"token"`
	}) error {
		s.AddAccessToken(t.Token)
		return nil
	}))
	return m
}

// adminGuest serves the guest's side: its guest attributes, and its
// metadata server for a guest outside the test process.
func (s *Server) adminGuest(m *http.ServeMux) {
	const inst = "/_fake/instances/{project}/{zone}/{name}/guest-attributes/{ns}/{key}"
	m.HandleFunc("PUT "+inst, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, maxGuestValue))
		if err == nil {
			err = s.SetGuestAttribute(r.PathValue("project"), r.PathValue("zone"), r.PathValue("name"), r.PathValue("ns")+"/"+r.PathValue("key"), string(b))
		}
		adminResult(w, err)
	})
	m.HandleFunc("DELETE "+inst, func(w http.ResponseWriter, r *http.Request) {
		adminResult(w, s.DeleteGuestAttribute(r.PathValue("project"), r.PathValue("zone"), r.PathValue("name"), r.PathValue("ns")+"/"+r.PathValue("key")))
	})
	m.HandleFunc("/_fake/metadata/{project}/{zone}/{name}/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path, r.URL.RawPath = "/"+r.PathValue("rest"), ""
		s.MetadataServer(r.PathValue("project"), r.PathValue("zone"), r.PathValue("name")).ServeHTTP(w, r)
	})
}

func adminResult(w http.ResponseWriter, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// adminFaults serves the fault and quota knobs. A body that does not parse
// injects nothing.
func (s *Server) adminFaults(m *http.ServeMux) {
	m.HandleFunc("POST /_fake/faults/error", admin(func(f wireErrorFault) error {
		d, err := parseDuration(f.For)
		if err == nil {
			s.InjectError(ErrorFault{Match: f.Match, Code: f.Code, Reason: f.Reason, Message: f.Message, Times: f.Times, For: d})
		}
		return err
	}))
	m.HandleFunc("POST /_fake/faults/operation", admin(func(f wireOpFault) error {
		s.FailOperations(OperationFault(f))
		return nil
	}))
	m.HandleFunc("POST /_fake/faults/latency", admin(func(f wireLatency) error {
		d, err := parseDuration(f.Delay)
		if err == nil {
			s.AddLatency(LatencyFault{Match: f.Match, Delay: d, Times: f.Times})
		}
		return err
	}))
	m.HandleFunc("POST /_fake/faults/storm", admin(func(f struct {
		For   string `json:"for"`
		Times int    `json:"times"`
	}) error {
		d, err := parseDuration(f.For)
		if err == nil {
			s.Storm(d, f.Times)
		}
		return err
	}))
	m.HandleFunc("DELETE /_fake/faults", func(w http.ResponseWriter, _ *http.Request) { s.ClearFaults() })
	m.HandleFunc("PUT /_fake/quotas/{project}", func(w http.ResponseWriter, r *http.Request) {
		admin(func(q Quota) error { s.SetQuota(r.PathValue("project"), q); return nil })(w, r)
	})
}

// admin decodes a JSON body into T and applies it; a bad body or a failed
// apply is a 400 with the error as plain text.
func admin[T any](apply func(T) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var v T
		if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := apply(v); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) adminState(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string][]json.RawMessage{
		"instances":  rawAll(s.Instances()),
		"addresses":  rawAll(s.Addresses()),
		"firewalls":  rawAll(s.Firewalls()),
		"operations": rawAll(s.Operations()),
	})
}

func rawAll[M proto.Message](ms []M) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(ms))
	for _, m := range ms {
		if b, err := protojson.Marshal(m); err == nil {
			out = append(out, b)
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	return d, errors.Wrapf(err, errFmtDuration, s)
}
