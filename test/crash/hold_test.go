/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package crash

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// maxHold bounds how long a holder keeps a response when nobody kills the
// provider, so a broken run ends instead of hanging.
const maxHold = time.Minute

// A trap catches one create in flight once armed. In the window mode
// (arm) the backend makes the instance but the provider does not hear so,
// and a SIGKILL now lands between the backend call and the write of the
// creation annotations: the window a crash-safe Create must survive without
// a duplicate. In the early mode (armEarly) the trap holds a later step of
// Create before the backend sees it: a kill then leaves an instance half
// made, which Observe and Delete must still find and remove.
type trap struct {
	mu           sync.Mutex
	armed, early bool
	// held receives the name of the instance whose create is being held.
	held chan string
	// deleted counts the deletes that succeeded: while every managed
	// resource lives, any is an instance (or a part) deleted under it.
	deleted atomic.Int64
	// lists counts the calls of the backend's List: the garbage
	// collector's, which nothing else calls.
	lists atomic.Int64
}

func newTrap() *trap { return &trap{held: make(chan string, 1)} }

// arm makes the trap catch the next create in the window, and forgets one
// it caught too late to be waited for.
func (tr *trap) arm() { tr.set(false) }

// armEarly makes the trap catch the next later step of a Create before the
// backend sees it.
func (tr *trap) armEarly() { tr.set(true) }

func (tr *trap) set(early bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	select {
	case <-tr.held:
	default:
	}
	tr.armed, tr.early = true, early
}

// disarm takes back an arm that caught nothing.
func (tr *trap) disarm() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.armed = false
}

// take disarms the trap if it is armed for a call: create tells whether
// the call is the create the window mode waits for, step whether it is the
// step the early mode waits for. before is true when the call must not
// reach the backend.
func (tr *trap) take(create, step bool) (hold, before bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if !tr.armed || !(tr.early && step || !tr.early && create) {
		return false, false
	}
	tr.armed = false
	return true, tr.early
}

// caught reports the name of the instance whose create is held.
func (tr *trap) caught(name string) {
	select {
	case tr.held <- name:
	default:
	}
}

// A holder serves HTTP requests with next, and holds the response to the
// create its trap catches until the caller goes away.
type holder struct {
	*trap
	next http.Handler
	// create matches the create of the window mode, step the later step of
	// Create of the early mode, list the List calls.
	create, step, list func(*http.Request) bool
}

func newHolder(next http.Handler, create, step, list func(*http.Request) bool) *holder {
	return &holder{trap: newTrap(), next: next, create: create, step: step, list: list}
}

func (h *holder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.list(r) {
		h.lists.Add(1)
	}
	hold, before := h.take(h.create(r), h.step(r))
	if !hold {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.next.ServeHTTP(sw, r)
		if r.Method == http.MethodDelete && sw.code/100 == 2 {
			h.deleted.Add(1)
		}
		return
	}
	body, _ := io.ReadAll(r.Body)
	if before {
		h.caught(objectName(body))
		select {
		case <-r.Context().Done():
		case <-time.After(maxHold):
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	h.next.ServeHTTP(rec, r)
	h.caught(objectName(body))
	select {
	case <-r.Context().Done():
		// The provider died with the request in flight: the response
		// is lost, as it would be with a real backend.
		return
	case <-time.After(maxHold):
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// objectName is the name in a create request's body: "name" in Compute
// Engine's JSON, metadata.name of a Kubernetes object in JSON or protobuf.
func objectName(body []byte) string {
	var o struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(body, &o) == nil && o.Name != "" {
		return o.Name
	}
	obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if m, ok := obj.(metav1.Object); ok && err == nil {
		return m.GetName()
	}
	return ""
}

// statusWriter remembers the status of a response it passes on.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Flush passes on flushes, for watches through the reverse proxy.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
