package gcpfake

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/googleapi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

func items(kv ...string) []*computepb.Items {
	out := make([]*computepb.Items, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &computepb.Items{Key: proto.String(kv[i]), Value: proto.String(kv[i+1])})
	}
	return out
}

func TestSetMetadata(t *testing.T) {
	const rid = "3b0e9f6c-2a41-4c8e-9d7f-5e6a1b2c3d4e"
	big := strings.Repeat("x", maxMetadataValue+1)
	half := strings.Repeat("x", maxMetadataValue)
	type want struct {
		code   int
		reason string
		msg    string
	}
	cases := map[string]struct {
		reason string
		// fp picks the fingerprint sent: "current", "stale" or "none".
		fp        string
		items     []*computepb.Items
		requestID string
		want      want
		// wantItems are the instance's items afterwards.
		wantItems []*computepb.Items
	}{
		"Current": {
			reason:    "With the current fingerprint the items replace the metadata.",
			fp:        "current",
			items:     items("a", "2", "b", "new"),
			wantItems: items("a", "2", "b", "new"),
		},
		"Stale": {
			reason:    "A fingerprint from before the last change is 412 conditionNotMet, and nothing changes.",
			fp:        "stale",
			items:     items("a", "3"),
			want:      want{http.StatusPreconditionFailed, ReasonConditionNotMet, "Supplied fingerprint does not match current metadata fingerprint."},
			wantItems: items("a", "2"),
		},
		"Missing": {
			reason:    "No fingerprint is refused as a stale one is.",
			fp:        "none",
			items:     items("a", "3"),
			want:      want{http.StatusPreconditionFailed, ReasonConditionNotMet, "Supplied fingerprint does not match current metadata fingerprint."},
			wantItems: items("a", "2"),
		},
		"ReplayedRequestID": {
			reason:    "A retry with the requestId of the call that made the fingerprint stale gets that call's operation, not a 412.",
			fp:        "stale",
			requestID: rid,
			items:     items("a", "2"),
			wantItems: items("a", "2"),
		},
		"BadKey": {
			reason:    "Keys follow GCE's syntax.",
			fp:        "current",
			items:     items("a.b", "1"),
			want:      want{http.StatusBadRequest, ReasonInvalid, "Invalid value for field 'resource.items[0].key': 'a.b'. Must be a match of regex '[a-zA-Z0-9-_]{1,128}'"},
			wantItems: items("a", "2"),
		},
		"DuplicateKey": {
			reason:    "A key appears once.",
			fp:        "current",
			items:     items("a", "1", "a", "2"),
			want:      want{http.StatusBadRequest, ReasonInvalid, ""},
			wantItems: items("a", "2"),
		},
		"ValueTooLarge": {
			reason:    "One value holds at most 256 KiB.",
			fp:        "current",
			items:     items("a", big),
			want:      want{http.StatusBadRequest, ReasonInvalid, ""},
			wantItems: items("a", "2"),
		},
		"TotalTooLarge": {
			reason:    "All items together hold at most 512 KiB.",
			fp:        "current",
			items:     items("a", half, "b", half),
			want:      want{http.StatusBadRequest, ReasonInvalid, "Invalid value for field 'resource': ''. Metadata total size exceeds 512 KB."},
			wantItems: items("a", "2"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, c := setup(t)
			ctx := ctxT(t)
			in := instance("vm")
			in.Metadata.Items = items("a", "1")
			mustWait(ctx, t, insertInstance(ctx, t, c, testZone, in))
			get := func() *computepb.Instance {
				t.Helper()
				i, err := c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"})
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				return i
			}
			set := func(fp *string, it []*computepb.Items, rid *string) (string, error) {
				op, err := c.inst.SetMetadata(ctx, &computepb.SetMetadataInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm",
					RequestId: rid, MetadataResource: &computepb.Metadata{Fingerprint: fp, Items: it}})
				if err != nil {
					return "", err
				}
				if err := op.Wait(ctx); err != nil {
					return "", err
				}
				if op.Proto().GetOperationType() != "setMetadata" || op.Proto().GetZone() == "" || op.Proto().GetError() != nil {
					t.Errorf("operation: type %q zone %q error %v; want a successful zone operation setMetadata",
						op.Proto().GetOperationType(), op.Proto().GetZone(), op.Proto().GetError())
				}
				return op.Name(), nil
			}
			stale := get().GetMetadata().Fingerprint
			var ridp *string
			if tc.requestID != "" {
				ridp = proto.String(tc.requestID)
			}
			// Every case starts from a change a=2, which makes stale stale.
			first, err := set(stale, items("a", "2"), ridp)
			if err != nil {
				t.Fatalf("the first setMetadata: %v", err)
			}
			before := get().GetMetadata()
			if before.GetFingerprint() == *stale {
				t.Fatal("setMetadata did not change the fingerprint")
			}
			var fp *string
			switch tc.fp {
			case "current":
				fp = before.Fingerprint
			case "stale":
				fp = stale
			}
			name, err := set(fp, tc.items, ridp)
			var g *googleapi.Error
			switch {
			case tc.want.code == 0 && err != nil:
				t.Errorf("%s\nsetMetadata: %v", tc.reason, err)
			case tc.want.code != 0 && (!errors.As(err, &g) || g.Code != tc.want.code || reasonOf(err) != tc.want.reason ||
				(tc.want.msg != "" && g.Message != tc.want.msg)):
				t.Errorf("%s\nsetMetadata: %v, want %d %s %q", tc.reason, err, tc.want.code, tc.want.reason, tc.want.msg)
			}
			if tc.requestID != "" && name != first {
				t.Errorf("%s\nreplayed requestId: operation %q, want the first one %q", tc.reason, name, first)
			}
			after := get().GetMetadata()
			if diff := cmp.Diff(tc.wantItems, after.GetItems(), protocmp.Transform()); diff != "" {
				t.Errorf("%s\nitems: -want +got:\n%s", tc.reason, diff)
			}
			if changed := after.GetFingerprint() != before.GetFingerprint(); changed != (tc.want.code == 0 && tc.requestID == "") {
				t.Errorf("%s\nfingerprint changed: %v", tc.reason, changed)
			}
			if n := s.Calls(CallInstancesSetMetadata); n != 2 {
				t.Errorf("%d setMetadata calls counted, want 2", n)
			}
		})
	}
	t.Run("NotFound", func(t *testing.T) {
		_, c := setup(t)
		_, err := c.inst.SetMetadata(ctxT(t), &computepb.SetMetadataInstanceRequest{Project: testProject, Zone: testZone, Instance: "nope",
			MetadataResource: &computepb.Metadata{Fingerprint: proto.String("x"), Items: items("a", "1")}})
		if reasonOf(err) != ReasonNotFound {
			t.Errorf("setMetadata of a missing instance: %v, want %s", err, ReasonNotFound)
		}
	})
}

// mdGet is one GET of a metadata server, as a guest's HTTP client sends it.
func mdGet(ctx context.Context, t *testing.T, base, path string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/computeMetadata/v1/"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Metadata-Flavor", "Google")
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error(), ""
	}
	defer rsp.Body.Close() //nolint:errcheck // Read to the end.
	b, _ := io.ReadAll(rsp.Body)
	return rsp.StatusCode, string(b), rsp.Header.Get("ETag")
}

type mdAnswer struct {
	code       int
	body, etag string
}

// mdWait starts a GET in the background; its answer arrives on the channel.
func mdWait(ctx context.Context, t *testing.T, base, path string) <-chan mdAnswer {
	t.Helper()
	ch := make(chan mdAnswer, 1)
	go func() {
		code, body, etag := mdGet(ctx, t, base, path)
		ch <- mdAnswer{code, body, etag}
	}()
	return ch
}

// awaitWaiters returns once n wait_for_change requests are pending.
func awaitWaiters(ctx context.Context, t *testing.T, s *Server, n int) {
	t.Helper()
	for {
		s.mu.Lock()
		got := s.waiters
		s.mu.Unlock()
		if got == n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d wait_for_change requests pending, want %d", got, n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestMetadataServerWaitForChange(t *testing.T) {
	s, c := setup(t)
	ctx := ctxT(t)
	in := instance("vm")
	in.Metadata.Items = items("conf", "v1", "other", "o")
	mustWait(ctx, t, insertInstance(ctx, t, c, testZone, in))
	md := httptest.NewServer(s.MetadataServer(testProject, testZone, "vm"))
	t.Cleanup(md.Close)
	setItems := func(kv ...string) {
		t.Helper()
		i, err := c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"})
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		op, err := c.inst.SetMetadata(ctx, &computepb.SetMetadataInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm",
			MetadataResource: &computepb.Metadata{Fingerprint: i.GetMetadata().Fingerprint, Items: items(kv...)}})
		if err != nil {
			t.Fatalf("SetMetadata: %v", err)
		}
		mustWait(ctx, t, op)
	}
	etagRE := regexp.MustCompile(`^[0-9a-f]{16}$`)

	code, body, e1 := mdGet(ctx, t, md.URL, "instance/attributes/conf")
	if code != http.StatusOK || body != "v1" || !etagRE.MatchString(e1) {
		t.Fatalf("GET conf: %d %q ETag %q; want 200 v1 with a 16-hex-digit ETag", code, body, e1)
	}
	_, _, dir1 := mdGet(ctx, t, md.URL, "instance/attributes/")
	if _, _, again := mdGet(ctx, t, md.URL, "instance/attributes/conf"); again != e1 {
		t.Errorf("the ETag of unchanged content changed: %q then %q", e1, again)
	}

	t.Run("OtherETagAnswersAtOnce", func(t *testing.T) {
		code, body, etag := mdGet(ctx, t, md.URL, "instance/attributes/conf?wait_for_change=true&last_etag=0000000000000000")
		if code != http.StatusOK || body != "v1" || etag != e1 {
			t.Errorf("wait with another last_etag: %d %q %q; want 200 v1 %q at once", code, body, etag, e1)
		}
	})
	t.Run("MissingKeyAnswersAtOnce", func(t *testing.T) {
		if code, _, _ := mdGet(ctx, t, md.URL, "instance/attributes/nope?wait_for_change=true"); code != http.StatusNotFound {
			t.Errorf("wait on a missing key: %d, want 404", code)
		}
	})
	t.Run("BadTimeout", func(t *testing.T) {
		if code, _, _ := mdGet(ctx, t, md.URL, "instance/attributes/conf?wait_for_change=true&timeout_sec=x"); code != http.StatusBadRequest {
			t.Errorf("timeout_sec=x: %d, want 400", code)
		}
	})
	t.Run("TimeoutAnswersUnchanged", func(t *testing.T) {
		code, body, etag := mdGet(ctx, t, md.URL, "instance/attributes/conf?wait_for_change=true&timeout_sec=1&last_etag="+e1)
		if code != http.StatusOK || body != "v1" || etag != e1 {
			t.Errorf("wait that timed out: %d %q %q; want 200 v1 %q", code, body, etag, e1)
		}
	})

	// Three waiters: on the key, on the key without last_etag (the next
	// change), and on the directory. A change of another key wakes only
	// the directory's; the change of conf wakes the others.
	onKey := mdWait(ctx, t, md.URL, "instance/attributes/conf?wait_for_change=true&last_etag="+e1)
	onNext := mdWait(ctx, t, md.URL, "instance/attributes/conf?wait_for_change=true")
	onDir := mdWait(ctx, t, md.URL, "instance/attributes/?recursive=true&wait_for_change=true&last_etag="+dir1)
	awaitWaiters(ctx, t, s, 3)
	setItems("conf", "v1", "other", "o2")
	d := <-onDir
	if d.code != http.StatusOK || d.body != `{"conf":"v1","other":"o2"}` || d.etag == dir1 || !etagRE.MatchString(d.etag) {
		t.Errorf("directory wait: %d %q %q; want 200, the JSON object and a new ETag", d.code, d.body, d.etag)
	}
	setItems("conf", "v2", "other", "o2")
	for name, ch := range map[string]<-chan mdAnswer{"last_etag": onKey, "next change": onNext} {
		a := <-ch
		if a.code != http.StatusOK || a.body != "v2" || a.etag == e1 || !etagRE.MatchString(a.etag) {
			t.Errorf("wait on conf (%s): %d %q %q; want 200 v2 and a new ETag", name, a.code, a.body, a.etag)
		}
	}

	t.Run("CallerGoesAway", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		ch := mdWait(cctx, t, md.URL, "instance/attributes/conf?wait_for_change=true")
		awaitWaiters(ctx, t, s, 1)
		cancel()
		if a := <-ch; a.code != 0 {
			t.Errorf("a cancelled wait answered %d %q", a.code, a.body)
		}
		awaitWaiters(ctx, t, s, 0) // the server stopped waiting too
	})
	t.Run("InstanceDeleted", func(t *testing.T) {
		ch := mdWait(ctx, t, md.URL, "instance/attributes/conf?wait_for_change=true")
		awaitWaiters(ctx, t, s, 1)
		op, err := c.inst.Delete(ctx, &computepb.DeleteInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"})
		if err != nil {
			t.Fatalf("Delete: %v", err)
		}
		mustWait(ctx, t, op)
		if a := <-ch; a.code != http.StatusNotFound {
			t.Errorf("wait across the instance's delete: %d %q, want 404", a.code, a.body)
		}
	})
}

func TestMetadataServerWaitEndsOnClose(t *testing.T) {
	s, c := setup(t)
	ctx := ctxT(t)
	mustWait(ctx, t, insertInstance(ctx, t, c, testZone, instance("vm")))
	md := httptest.NewServer(s.MetadataServer(testProject, testZone, "vm"))
	t.Cleanup(md.Close)
	ch := mdWait(ctx, t, md.URL, "instance/attributes/startup-script?wait_for_change=true")
	awaitWaiters(ctx, t, s, 1)
	s.Close()
	if a := <-ch; a.code != http.StatusServiceUnavailable {
		t.Errorf("a wait when the fake stops: %d %q, want 503", a.code, a.body)
	}
}
