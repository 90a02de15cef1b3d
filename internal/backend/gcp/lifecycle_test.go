/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

func TestLifecycleClose(t *testing.T) {
	type step struct {
		op         string // acquire, release, shutdown
		wantErr    backend.Class
		wantClosed int
	}
	cases := map[string]struct {
		reason string
		steps  []step
	}{
		"Idle": {
			reason: "An idle backend closes its clients at once, and only once.",
			steps:  []step{{op: "shutdown", wantClosed: 1}, {op: "shutdown", wantClosed: 1}, {op: "acquire", wantErr: backend.ClassTransient, wantClosed: 1}},
		},
		"InFlight": {
			reason: "A call in flight keeps the clients open until it ends; new calls fail.",
			steps: []step{
				{op: "acquire"}, {op: "acquire"}, {op: "shutdown"},
				{op: "acquire", wantErr: backend.ClassTransient},
				{op: "release"}, {op: "release", wantClosed: 1},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			closed := 0
			l := &lifecycle{close: func() error { closed++; return nil }}
			for i, s := range tc.steps {
				var err error
				switch s.op {
				case "acquire":
					err = l.acquire()
				case "release":
					l.release()
				case "shutdown":
					err = l.shutdown()
				}
				if diff := cmp.Diff(s.wantErr, backend.ClassOf(err)); diff != "" {
					t.Errorf("%s\nstep %d (%s) error class: -want +got:\n%s", tc.reason, i, s.op, diff)
				}
				if diff := cmp.Diff(s.wantClosed, closed); diff != "" {
					t.Errorf("%s\nstep %d (%s) closes: -want +got:\n%s", tc.reason, i, s.op, diff)
				}
			}
		})
	}
}
