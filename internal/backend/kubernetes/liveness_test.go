/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

func TestLiveness(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	refused := errors.New("connection refused")
	listFailed := errors.New("failed to list *v1.Pod: i/o timeout")
	unreachable := func(since time.Duration, cause error) error {
		return backend.Transient(errors.Wrapf(cause, errFmtUnreachable, t0.Add(since).Format(time.RFC3339)))
	}
	// A step happens at t0+at: a failed list or watch (watch), then a
	// check whose probe, if asked, answers probe.
	type step struct {
		at     time.Duration
		watch  error
		wrote  bool // the backend's request was answered before the check
		probe  error
		cancel bool // the caller gave up before the probe answered
		// want: the error of the check, how many probes were made so far,
		// and whether the cache may be read after the check.
		err    error
		probes int
		fresh  bool
	}
	cases := map[string]struct {
		reason string
		steps  []step
	}{
		"Reachable": {
			reason: "A reachable target is asked at most once per interval, however often Observe runs.",
			steps: []step{
				{at: 0, probes: 1, fresh: true},
				{at: 1 * time.Second, probes: 1, fresh: true},
				{at: 9 * time.Second, probes: 1, fresh: true},
				{at: 10 * time.Second, probes: 2, fresh: true},
				{at: 15 * time.Second, probes: 2, fresh: true},
			},
		},
		"CutFoundByCheck": {
			reason: "A cut the informers retry quietly is found by the next check, and reported with its start until the target answers.",
			steps: []step{
				{at: 0, probes: 1, fresh: true},
				{at: 5 * time.Second, probe: refused, probes: 1, fresh: true},
				{at: 10 * time.Second, probe: refused, err: unreachable(10*time.Second, refused), probes: 2},
				{at: 12 * time.Second, probe: refused, err: unreachable(10*time.Second, refused), probes: 2},
				{at: 20 * time.Second, probe: refused, err: unreachable(10*time.Second, refused), probes: 3},
			},
		},
		"CutFoundByWatch": {
			reason: "A failed list or watch is reported at once, without waiting for the next check.",
			steps: []step{
				{at: 0, probes: 1, fresh: true},
				{at: 3 * time.Second, watch: listFailed, err: unreachable(3*time.Second, listFailed), probes: 1},
				{at: 10 * time.Second, probe: refused, err: unreachable(3*time.Second, refused), probes: 2},
			},
		},
		"Back": {
			reason: "Once the target answers, the next check clears the error, but the cache is not read until the informers had time to catch up.",
			steps: []step{
				{at: 0, probe: refused, err: unreachable(0, refused), probes: 1},
				{at: 10 * time.Second, probes: 2},
				{at: 15 * time.Second, probes: 2},
				{at: 10*time.Second + catchUp, probes: 3, fresh: true},
			},
		},
		"Answered": {
			reason: "A request the target answered vouches for it as a check would: no check while the backend writes.",
			steps: []step{
				{at: 0, probes: 1, fresh: true},
				{at: 8 * time.Second, wrote: true, probes: 1, fresh: true},
				{at: 16 * time.Second, wrote: true, probes: 1, fresh: true},
				{at: 26 * time.Second, probes: 2, fresh: true},
			},
		},
		"AnsweredDuringOutage": {
			reason: "During an outage an answered request ends nothing: the next check does, and the catch-up starts.",
			steps: []step{
				{at: 0, probe: refused, err: unreachable(0, refused), probes: 1},
				{at: 10 * time.Second, wrote: true, probe: refused, err: unreachable(0, refused), probes: 2},
				{at: 20 * time.Second, probes: 3},
			},
		},
		"CallerGaveUp": {
			reason: "A check whose caller gave up says nothing of the target: the next call checks again.",
			steps: []step{
				{at: 0, probe: context.Canceled, cancel: true, err: backend.Transient(context.Canceled), probes: 1, fresh: true},
				{at: 1 * time.Second, probes: 2, fresh: true},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			now := t0
			var answer error
			probes := 0
			l := newLiveness(func(context.Context) error {
				probes++
				return answer
			})
			l.now = func() time.Time { return now }
			for i, s := range tc.steps {
				now = t0.Add(s.at)
				answer = s.probe
				if s.watch != nil {
					l.failed(s.watch)
				}
				if s.wrote {
					l.answered()
				}
				ctx, cancel := context.WithCancel(context.Background())
				if s.cancel {
					cancel()
				}
				err := l.check(ctx)
				cancel()
				if diff := cmp.Diff(s.err, err, test.EquateErrors()); diff != "" {
					t.Errorf("%s\nstep %d: check(): -want error, +got error:\n%s", tc.reason, i, diff)
				}
				if probes != s.probes {
					t.Errorf("%s\nstep %d: %d probes, want %d", tc.reason, i, probes, s.probes)
				}
				if got := l.fresh(); got != s.fresh {
					t.Errorf("%s\nstep %d: fresh() = %t, want %t", tc.reason, i, got, s.fresh)
				}
			}
		})
	}
}

// TestLivenessBack: the end of an outage is told to onBack once, and the
// catch-up ends when the cache says it has listed again, not before.
func TestLivenessBack(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	var answer error
	l := newLiveness(func(context.Context) error { return answer })
	l.now = func() time.Time { return now }
	backs := make(chan struct{}, 10)
	l.onBack = func() { backs <- struct{}{} }
	ctx := context.Background()

	_ = l.check(ctx)
	answer = errors.New("connection refused")
	now = now.Add(liveInterval)
	_ = l.check(ctx)
	l.caughtUp()
	if l.fresh() {
		t.Error("caughtUp() during an outage: fresh() = true, want false")
	}
	answer = nil
	now = now.Add(liveInterval)
	if err := l.check(ctx); err != nil {
		t.Fatalf("check() once the target answers: %v", err)
	}
	select {
	case <-backs:
	case <-time.After(5 * time.Second):
		t.Fatal("onBack was not called when the target answered again")
	}
	if l.fresh() {
		t.Error("right after the outage: fresh() = true, want false until the cache caught up")
	}
	l.caughtUp()
	if !l.fresh() {
		t.Error("after caughtUp(): fresh() = false, want true")
	}
	now = now.Add(liveInterval)
	_ = l.check(ctx)
	select {
	case <-backs:
		t.Error("onBack was called again without a new outage")
	case <-time.After(100 * time.Millisecond):
	}
}

func TestReadyz(t *testing.T) {
	cases := map[string]struct {
		reason string
		code   int
		fails  bool
	}{
		"Ready":     {reason: "A ready server answers.", code: http.StatusOK},
		"Forbidden": {reason: "A server that refuses the path still answers.", code: http.StatusForbidden},
		"NotFound":  {reason: "A server without the path still answers.", code: http.StatusNotFound},
		"NotReady":  {reason: "A server that is not ready (its etcd is down) serves no watch either.", code: http.StatusInternalServerError, fails: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var path string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				path = r.URL.Path
				w.WriteHeader(tc.code)
			}))
			defer srv.Close()
			probe, err := readyz(&rest.Config{Host: srv.URL + "/prefix"})
			if err != nil {
				t.Fatalf("readyz(): %v", err)
			}
			err = probe(context.Background())
			if got := err != nil; got != tc.fails {
				t.Errorf("%s\nprobe(): %v, want failure %t", tc.reason, err, tc.fails)
			}
			if path != "/prefix/readyz" {
				t.Errorf("%s\nprobe() asked for %q, want /prefix/readyz", tc.reason, path)
			}
		})
	}
	t.Run("NoAnswer", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		probe, err := readyz(&rest.Config{Host: srv.URL})
		if err != nil {
			t.Fatalf("readyz(): %v", err)
		}
		if err := probe(context.Background()); err == nil {
			t.Error("probe() of a closed port: no error")
		}
	})
}
