/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package crash

import (
	"context"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// The suite's own logic, without any component: what it counts as a
// duplicate, a change or a held create must be right for its verdicts to be.

func mrNamed(name, uid, external string) unstructured.Unstructured {
	u := unstructured.Unstructured{}
	u.SetName(name)
	u.SetUID(types.UID(uid))
	if external != "" {
		meta.SetExternalName(&u, external)
	}
	return u
}

func TestCount(t *testing.T) {
	type want struct {
		missing, duplicates []string
		versions            map[string]string
	}
	mrs := []unstructured.Unstructured{mrNamed("a", "uid-a", "egp-a"), mrNamed("b", "uid-b", "egp-b")}
	cases := map[string]struct {
		reason string
		mrs    []unstructured.Unstructured
		ins    []instance
		want   want
	}{
		"OnePerResource": {
			reason: "One instance per resource, labelled with its UID, is neither missing nor a duplicate.",
			mrs:    mrs,
			ins:    []instance{{name: "egp-a", owner: "uid-a", version: "1"}, {name: "egp-b", owner: "uid-b", version: "2"}},
			want:   want{versions: map[string]string{"egp-a": "1", "egp-b": "2"}},
		},
		"Missing": {
			reason: "A resource without an instance, or without an external name yet, is missing.",
			mrs:    append(mrs, mrNamed("c", "uid-c", "")),
			ins:    []instance{{name: "egp-a", version: "1"}},
			want:   want{missing: []string{"b", "c"}, versions: map[string]string{"egp-a": "1"}},
		},
		"Duplicates": {
			reason: "A second instance of one name, one labelled for another owner and one nobody owns are duplicates.",
			mrs:    mrs,
			ins: []instance{
				{name: "egp-a", owner: "uid-a", version: "1"}, {name: "egp-a", owner: "uid-a", version: "3"},
				{name: "egp-b", owner: "uid-x", version: "2"}, {name: "egp-z", version: "4"},
			},
			want: want{
				duplicates: []string{
					"egp-a (a second instance)",
					"egp-b (labelled for owner uid-x, not uid-b)",
					"egp-z (no managed resource has this external name)",
				},
				versions: map[string]string{"egp-a": "1"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := count(tc.mrs, tc.ins)
			if diff := cmp.Diff(tc.want, want{got.missing, got.duplicates, got.versions}, cmpopts.EquateEmpty(), cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\ncount(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestChanged(t *testing.T) {
	before := map[string]string{"a": "1", "b": "2", "c": "3"}
	after := map[string]string{"a": "1", "b": "9", "d": "4"}
	want := []string{"b made again", "c deleted"}
	if diff := cmp.Diff(want, changed(before, after)); diff != "" {
		t.Errorf("changed(...): -want, +got:\n%s", diff)
	}
}

func TestObjectName(t *testing.T) {
	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: metav1.ObjectMeta{Name: "egp-svc"}}
	encode := func(contentType string) []byte {
		info, _ := runtime.SerializerInfoForMediaType(clientgoscheme.Codecs.SupportedMediaTypes(), contentType)
		var b strings.Builder
		if err := info.Serializer.Encode(svc, &b); err != nil {
			t.Fatal(err)
		}
		return []byte(b.String())
	}
	cases := map[string]struct {
		reason string
		body   []byte
		want   string
	}{
		"ComputeEngine":      {reason: "An insert names the instance at the top.", body: []byte(`{"name":"egp-vm","labels":{}}`), want: "egp-vm"},
		"KubernetesJSON":     {reason: "A Kubernetes create in JSON names the object in its metadata.", body: encode(runtime.ContentTypeJSON), want: "egp-svc"},
		"KubernetesProtobuf": {reason: "client-go creates built-in objects in protobuf.", body: encode(runtime.ContentTypeProtobuf), want: "egp-svc"},
		"Garbage":            {reason: "A body that is neither names nothing.", body: []byte("\x00\x01"), want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := objectName(tc.body); got != tc.want {
				t.Errorf("\n%s\nobjectName(...): want %q, got %q", tc.reason, tc.want, got)
			}
		})
	}
}

func TestXDRString(t *testing.T) {
	b := binary.BigEndian.AppendUint32(nil, 5)
	b = append(b, "egp-a\x00\x00\x00"...)
	cases := map[string]struct {
		b    []byte
		want string
	}{
		"Padded":    {b: b, want: "egp-a"},
		"Truncated": {b: b[:6], want: ""},
		"Short":     {b: b[:2], want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := xdrString(tc.b); got != tc.want {
				t.Errorf("xdrString(...): want %q, got %q", tc.want, got)
			}
		})
	}
}

// TestHolder shows the window the suite kills the provider in: the create
// takes effect, its response never reaches a caller that goes away, and
// other calls pass untouched.
func TestHolder(t *testing.T) {
	var created atomic.Int64
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			created.Add(1)
		}
		_, _ = w.Write([]byte("{}"))
	})
	isPost := func(r *http.Request) bool { return r.Method == http.MethodPost }
	never := func(*http.Request) bool { return false }
	h := newHolder(backend, isPost, never, never)
	srv := httptest.NewServer(h)
	defer srv.Close()

	h.arm()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{"name":"egp-a"}`))
		rsp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = rsp.Body.Close()
		}
		done <- err
	}()
	select {
	case name := <-h.held:
		if name != "egp-a" {
			t.Errorf("held: want egp-a, got %q", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the create was not held")
	}
	if created.Load() != 1 {
		t.Errorf("the held create did not reach the backend")
	}
	select {
	case err := <-done:
		t.Fatalf("the caller heard back while the create was held: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	if err := <-done; err == nil {
		t.Error("the caller that went away got a response")
	}

	// Disarmed now: the next create passes, and a successful DELETE counts.
	for _, m := range []string{http.MethodPost, http.MethodDelete} {
		req, _ := http.NewRequestWithContext(t.Context(), m, srv.URL, nil)
		rsp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s after the hold: %v", m, err)
		}
		_ = rsp.Body.Close()
	}
	if created.Load() != 2 || h.deleted.Load() != 1 {
		t.Errorf("after the hold: want 2 creates and 1 delete, got %d and %d", created.Load(), h.deleted.Load())
	}
}
