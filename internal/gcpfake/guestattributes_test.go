package gcpfake

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/googleapi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

func withGuestAttributes(v string) instanceModifier {
	return func(i *computepb.Instance) {
		i.Metadata.Items = append(i.Metadata.Items, &computepb.Items{Key: proto.String(MetadataEnableGuestAttributes), Value: proto.String(v)})
	}
}

// mdRequest sends one request to a metadata server, as a guest would.
func mdRequest(t *testing.T, h http.Handler, method, path, body string, header map[string]string) (int, string, http.Header) {
	t.Helper()
	r := httptest.NewRequest(method, "http://metadata.google.internal"+path, strings.NewReader(body))
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(b), w.Result().Header
}

func TestMetadataServer(t *testing.T) {
	flavor := map[string]string{"Metadata-Flavor": "Google"}
	const ga = "/computeMetadata/v1/instance/guest-attributes/egressproxy/state"
	type req struct {
		method, path, body string
		header             map[string]string
	}
	cases := map[string]struct {
		reason   string
		enable   string // enable-guest-attributes; "" leaves it out
		before   []req
		req      req
		wantCode int
		wantBody string
	}{
		"NoFlavor": {
			reason:   "A request without Metadata-Flavor: Google is refused.",
			req:      req{method: "GET", path: "/computeMetadata/v1/instance/attributes/startup-script"},
			wantCode: http.StatusForbidden,
			wantBody: msgMetadataNoFlavor,
		},
		"Forwarded": {
			reason:   "A request a proxy relayed (X-Forwarded-For) is refused, even with the flavor header.",
			req:      req{method: "GET", path: "/computeMetadata/v1/instance/attributes/startup-script", header: map[string]string{"Metadata-Flavor": "Google", "X-Forwarded-For": "10.0.0.2"}},
			wantCode: http.StatusForbidden,
			wantBody: msgMetadataForwarded,
		},
		"Attribute": {
			reason:   "An instance metadata value is served as it is.",
			req:      req{method: "GET", path: "/computeMetadata/v1/instance/attributes/startup-script", header: flavor},
			wantCode: http.StatusOK,
			wantBody: "#!/bin/sh\necho hi",
		},
		"AttributeKeys": {
			reason:   "The attributes directory lists the metadata keys.",
			req:      req{method: "GET", path: "/computeMetadata/v1/instance/attributes/", header: flavor},
			wantCode: http.StatusOK,
			wantBody: "startup-script\nuser-data\n",
		},
		"AttributeMissing": {
			reason:   "A metadata key the instance does not have is 404.",
			req:      req{method: "GET", path: "/computeMetadata/v1/instance/attributes/nope", header: flavor},
			wantCode: http.StatusNotFound,
			wantBody: msgMetadataNotFound,
		},
		"Name": {
			reason:   "instance/name is the instance's name.",
			req:      req{method: "GET", path: "/computeMetadata/v1/instance/name", header: flavor},
			wantCode: http.StatusOK,
			wantBody: "proxy-1",
		},
		"GuestDisabled": {
			reason:   "Without enable-guest-attributes=TRUE the guest may not write.",
			req:      req{method: "PUT", path: ga, body: "serving", header: flavor},
			wantCode: http.StatusForbidden,
			wantBody: msgMetadataGuestDisabled,
		},
		"GuestDisabledFalse": {
			reason:   "enable-guest-attributes=FALSE is off too.",
			enable:   "FALSE",
			req:      req{method: "PUT", path: ga, body: "serving", header: flavor},
			wantCode: http.StatusForbidden,
			wantBody: msgMetadataGuestDisabled,
		},
		"GuestPutGet": {
			reason:   "What the guest PUTs it reads back.",
			enable:   "TRUE",
			before:   []req{{method: "PUT", path: ga, body: "serving abc", header: flavor}},
			req:      req{method: "GET", path: ga, header: flavor},
			wantCode: http.StatusOK,
			wantBody: "serving abc",
		},
		"GuestEnabledLowerCase": {
			reason:   "The flag is read case-insensitively.",
			enable:   "true",
			before:   []req{{method: "PUT", path: ga, body: "v", header: flavor}},
			req:      req{method: "GET", path: ga, header: flavor},
			wantCode: http.StatusOK,
			wantBody: "v",
		},
		"GuestPutNoFlavor": {
			reason:   "A write needs the flavor header too.",
			enable:   "TRUE",
			req:      req{method: "PUT", path: ga, body: "v"},
			wantCode: http.StatusForbidden,
			wantBody: msgMetadataNoFlavor,
		},
		"GuestDeleted": {
			reason:   "A deleted guest attribute is 404.",
			enable:   "TRUE",
			before:   []req{{method: "PUT", path: ga, body: "v", header: flavor}, {method: "DELETE", path: ga, header: flavor}},
			req:      req{method: "GET", path: ga, header: flavor},
			wantCode: http.StatusNotFound,
			wantBody: msgMetadataNotFound,
		},
		"GuestBadName": {
			reason:   "Namespaces and keys hold only letters, digits, '_' and '-'.",
			enable:   "TRUE",
			req:      req{method: "PUT", path: "/computeMetadata/v1/instance/guest-attributes/egress.proxy/state", body: "v", header: flavor},
			wantCode: http.StatusBadRequest,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, c := setup(t)
			in := instance("proxy-1")
			if tc.enable != "" {
				withGuestAttributes(tc.enable)(in)
			}
			mustWait(ctxT(t), t, insertInstance(ctxT(t), t, c, testZone, in))
			md := s.MetadataServer(testProject, testZone, "proxy-1")
			for _, b := range tc.before {
				if code, body, _ := mdRequest(t, md, b.method, b.path, b.body, b.header); code >= 300 {
					t.Fatalf("%s %s: %d %s", b.method, b.path, code, body)
				}
			}
			code, body, h := mdRequest(t, md, tc.req.method, tc.req.path, tc.req.body, tc.req.header)
			if code != tc.wantCode || (tc.wantBody != "" && body != tc.wantBody) {
				t.Errorf("%s\n%s %s: want %d %q, got %d %q", tc.reason, tc.req.method, tc.req.path, tc.wantCode, tc.wantBody, code, body)
			}
			if h.Get("Metadata-Flavor") != "Google" {
				t.Errorf("%s\nthe response lacks Metadata-Flavor: Google", tc.reason)
			}
		})
	}
}

func TestGetGuestAttributes(t *testing.T) {
	entry := func(ns, k, v string) *computepb.GuestAttributesEntry {
		return &computepb.GuestAttributesEntry{Namespace: proto.String(ns), Key: proto.String(k), Value: proto.String(v)}
	}
	cases := map[string]struct {
		reason  string
		req     *computepb.GetGuestAttributesInstanceRequest
		want    *computepb.GuestAttributes
		wantErr int
	}{
		"VariableKey": {
			reason: "variableKey returns the value in variableValue.",
			req:    &computepb.GetGuestAttributesInstanceRequest{VariableKey: proto.String("egressproxy/state")},
			want:   &computepb.GuestAttributes{Kind: proto.String("compute#guestAttributes"), VariableKey: proto.String("egressproxy/state"), VariableValue: proto.String("serving abc")},
		},
		"VariableKeyMissing": {
			reason:  "A key the guest never wrote is 404, as on GCE.",
			req:     &computepb.GetGuestAttributesInstanceRequest{VariableKey: proto.String("egressproxy/other")},
			wantErr: http.StatusNotFound,
		},
		"QueryNamespace": {
			reason: "queryPath ns/ returns the namespace's entries, sorted by key.",
			req:    &computepb.GetGuestAttributesInstanceRequest{QueryPath: proto.String("egressproxy/")},
			want: &computepb.GuestAttributes{Kind: proto.String("compute#guestAttributes"), QueryPath: proto.String("egressproxy/"), QueryValue: &computepb.GuestAttributesValue{Items: []*computepb.GuestAttributesEntry{
				entry("egressproxy", "reason", "none"), entry("egressproxy", "state", "serving abc"),
			}}},
		},
		"QueryAll": {
			reason: "queryPath / returns every entry.",
			req:    &computepb.GetGuestAttributesInstanceRequest{QueryPath: proto.String("/")},
			want: &computepb.GuestAttributes{Kind: proto.String("compute#guestAttributes"), QueryPath: proto.String("/"), QueryValue: &computepb.GuestAttributesValue{Items: []*computepb.GuestAttributesEntry{
				entry("egressproxy", "reason", "none"), entry("egressproxy", "state", "serving abc"), entry("hostkeys", "ssh-ed25519", "AAAA"),
			}}},
		},
		"QueryMissingNamespace": {
			reason:  "A namespace without entries is 404.",
			req:     &computepb.GetGuestAttributesInstanceRequest{QueryPath: proto.String("nothing/")},
			wantErr: http.StatusNotFound,
		},
		"NoInstance": {
			reason:  "An instance that does not exist is 404.",
			req:     &computepb.GetGuestAttributesInstanceRequest{Instance: "proxy-2", VariableKey: proto.String("egressproxy/state")},
			wantErr: http.StatusNotFound,
		},
	}
	s, c := setup(t)
	mustWait(ctxT(t), t, insertInstance(ctxT(t), t, c, testZone, instance("proxy-1", withGuestAttributes("TRUE"))))
	md := s.MetadataServer(testProject, testZone, "proxy-1")
	for p, v := range map[string]string{"egressproxy/state": "serving abc", "egressproxy/reason": "none", "hostkeys/ssh-ed25519": "AAAA"} {
		if code, body, _ := mdRequest(t, md, "PUT", "/computeMetadata/v1/instance/guest-attributes/"+p, v, map[string]string{"Metadata-Flavor": "Google"}); code != http.StatusOK {
			t.Fatalf("PUT %s: %d %s", p, code, body)
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.req.Project, tc.req.Zone = testProject, testZone
			if tc.req.Instance == "" {
				tc.req.Instance = "proxy-1"
			}
			got, err := c.inst.GetGuestAttributes(ctxT(t), tc.req)
			if tc.wantErr != 0 {
				var g *googleapi.Error
				if !errors.As(err, &g) || g.Code != tc.wantErr || reasonOf(err) != ReasonNotFound {
					t.Errorf("%s\nwant HTTP %d notFound, got %v", tc.reason, tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nGetGuestAttributes: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
		})
	}
	if n := s.Calls(CallInstancesGuestAttrs); n != len(cases) {
		t.Errorf("want %d getGuestAttributes calls counted, got %d", len(cases), n)
	}
}

func TestAdminGuestAttributes(t *testing.T) {
	s, c := setup(t)
	mustWait(ctxT(t), t, insertInstance(ctxT(t), t, c, testZone, instance("proxy-1", withGuestAttributes("TRUE"))))
	base := s.URL() + "/_fake/"
	do := func(method, url, body string, h map[string]string) (int, string) {
		req, _ := http.NewRequestWithContext(ctxT(t), method, url, strings.NewReader(body))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close() //nolint:errcheck // Test.
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := do("PUT", base+"instances/test-project/us-central1-a/proxy-1/guest-attributes/egressproxy/state", "serving x", nil); code != http.StatusNoContent {
		t.Fatalf("admin PUT: %d %s", code, body)
	}
	if v, ok := s.GuestAttribute(testProject, testZone, "proxy-1", "egressproxy/state"); !ok || v != "serving x" {
		t.Errorf("after the admin PUT: got %q, %t", v, ok)
	}
	code, body := do("GET", base+"metadata/test-project/us-central1-a/proxy-1/computeMetadata/v1/instance/guest-attributes/egressproxy/state", "", map[string]string{"Metadata-Flavor": "Google"})
	if code != http.StatusOK || body != "serving x" {
		t.Errorf("the metadata server under /_fake/metadata/: got %d %q", code, body)
	}
	if code, body := do("DELETE", base+"instances/test-project/us-central1-a/proxy-1/guest-attributes/egressproxy/state", "", nil); code != http.StatusNoContent {
		t.Fatalf("admin DELETE: %d %s", code, body)
	}
	if _, ok := s.GuestAttribute(testProject, testZone, "proxy-1", "egressproxy/state"); ok {
		t.Error("the admin DELETE left the guest attribute")
	}
	if err := s.SetGuestAttribute(testProject, testZone, "proxy-2", "egressproxy/state", "x"); err == nil {
		t.Error("SetGuestAttribute on a missing instance succeeded")
	}
}
