package gcpfake

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
)

func TestAdminEndpoint(t *testing.T) {
	s, c := setup(t, WithInstanceBoot(0, 0))
	ctx := ctxT(t)
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, s.URL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	steps := []struct {
		reason       string
		method, path string
		body         string
		wantCode     int
	}{
		{"an operation fault", "POST", "/_fake/faults/operation", `{"match":{"call":"compute.instances.insert"},"code":"ZONE_RESOURCE_POOL_EXHAUSTED","times":1}`, 204},
		{"a latency fault", "POST", "/_fake/faults/latency", `{"match":{"call":"compute.instances.list"},"delay":"1ms"}`, 204},
		{"an error fault", "POST", "/_fake/faults/error", `{"match":{"call":"compute.instances.delete"},"code":403,"reason":"forbidden","times":1,"for":"1m"}`, 204},
		{"a quota", "PUT", "/_fake/quotas/test-project", `{"instances":5}`, 204},
		{"operation polls", "PUT", "/_fake/operation-polls", `{"polls":1}`, 204},
		{"a bad duration", "POST", "/_fake/faults/storm", `{"for":"soon"}`, 400},
		{"a bad body", "POST", "/_fake/faults/error", `{`, 400},
	}
	for _, st := range steps {
		if code, body := do(st.method, st.path, st.body); code != st.wantCode {
			t.Errorf("%s: %s %s = %d %s, want %d", st.reason, st.method, st.path, code, body, st.wantCode)
		}
	}

	op := insertInstance(ctx, t, c, testZone, instance("vm"))
	if err := op.Wait(ctx); err != nil || op.Proto().GetError() == nil {
		t.Errorf("insert under an admin operation fault: Wait %v, op error %v; want nil and an error", err, op.Proto().GetError())
	}
	mustWait(ctx, t, insertInstance(ctx, t, c, testZone, instance("vm")))
	if code, body := do("PUT", "/_fake/instances/test-project/us-central1-a/vm/status", `{"status":"TERMINATED"}`); code != 204 {
		t.Fatalf("set status: %d %s", code, body)
	}
	if i, _ := s.Instance(testProject, testZone, "vm"); i.GetStatus() != "TERMINATED" {
		t.Errorf("status after the admin call = %q", i.GetStatus())
	}
	if code, _ := do("PUT", "/_fake/instances/test-project/us-central1-a/nope/status", `{"status":"TERMINATED"}`); code != 400 {
		t.Errorf("set status of a missing instance: %d, want 400", code)
	}

	_, body := do("GET", "/_fake/calls", "")
	var calls map[string]int
	if err := json.Unmarshal([]byte(body), &calls); err != nil {
		t.Fatalf("calls: %v in %s", err, body)
	}
	if diff := cmp.Diff(2, calls[CallInstancesInsert]); diff != "" {
		t.Errorf("insert calls: -want +got:\n%s", diff)
	}
	_, body = do("GET", "/_fake/state", "")
	var state map[string][]map[string]any
	if err := json.Unmarshal([]byte(body), &state); err != nil || len(state["instances"]) != 1 || state["instances"][0]["name"] != "vm" {
		t.Errorf("state: %v %s", err, body)
	}
	code, key := do("POST", "/_fake/keys?email=sa@p.iam.gserviceaccount.com", "")
	if code != 200 || !strings.Contains(key, `"client_email": "sa@p.iam.gserviceaccount.com"`) {
		t.Errorf("keys: %d %s", code, key)
	}
	if code, _ := do("GET", "/_fake/healthz", ""); code != 200 {
		t.Errorf("healthz: %d", code)
	}
	if code, _ := do("DELETE", "/_fake/calls", ""); code != 200 || s.Calls(CallInstancesInsert) != 0 {
		t.Errorf("reset calls: %d, insert calls now %d", code, s.Calls(CallInstancesInsert))
	}
	_, err := c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"})
	if err != nil {
		t.Errorf("Get: %v", err)
	}
}

func TestUnknownRouteAndProject(t *testing.T) {
	s, c := setup(t, WithProjects(testProject))
	ctx := ctxT(t)
	resp, err := http.Get(s.URL() + "/compute/v1/projects/test-project/zones/us-central1-a/disks")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 404 || !strings.Contains(string(b), `"reason":"notFound"`) {
		t.Errorf("unknown route: %d %s, want a 404 envelope", resp.StatusCode, b)
	}
	_, err = c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: "someone-else", Zone: testZone, Instance: "vm"})
	if reasonOf(err) != ReasonNotFound || !strings.Contains(err.Error(), "projects/someone-else") {
		t.Errorf("unknown project: %v, want notFound", err)
	}
}
