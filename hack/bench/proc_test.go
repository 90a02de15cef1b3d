/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSample(t *testing.T) {
	type want struct {
		s  sample
		ok bool
	}
	cases := map[string]struct {
		reason string
		line   string
		want   want
	}{
		"Comment": {
			reason: "HELP and TYPE lines are no samples.",
			line:   "# TYPE rest_client_requests_total counter",
		},
		"Labels": {
			reason: "Labels are unquoted; the value follows the closing brace.",
			line:   `rest_client_requests_total{code="200",host="localhost:6443",method="GET"} 42`,
			want: want{ok: true, s: sample{name: "rest_client_requests_total", value: 42,
				labels: map[string]string{"code": "200", "host": "localhost:6443", "method": "GET"}}},
		},
		"QuotedComma": {
			reason: "A comma or brace inside a quoted value does not split labels.",
			line:   `m{a="x,y}",b="z"} 1.5e+02`,
			want:   want{ok: true, s: sample{name: "m", value: 150, labels: map[string]string{"a": "x,y}", "b": "z"}}},
		},
		"NoLabels": {
			reason: "A sample without labels is a name and a value.",
			line:   "process_cpu_seconds_total 3.25",
			want:   want{ok: true, s: sample{name: "process_cpu_seconds_total", value: 3.25, labels: map[string]string{}}},
		},
		"BadValue": {
			reason: "A line whose value is no number is skipped.",
			line:   "m{a=\"b\"} x",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, ok := parseSample(tc.line)
			if diff := cmp.Diff(tc.want, want{s: s, ok: ok}, cmp.AllowUnexported(want{}, sample{})); diff != "" {
				t.Errorf("%s\nparseSample(%q): -want, +got:\n%s", tc.reason, tc.line, diff)
			}
		})
	}
}

func TestCountsBackend(t *testing.T) {
	c := counts{
		{target: controlPlane, verb: "PUT"}:  3,
		{target: targetCluster, verb: "GET"}: 2,
		{target: targetGCE, verb: "x"}:       1,
	}
	if got := c.backend().total(); got != 3 {
		t.Errorf("backend().total(): want 3 (all but the control plane), got %v", got)
	}
	if got := c.minus(counts{{target: controlPlane, verb: "PUT"}: 1}).total(); got != 5 {
		t.Errorf("minus: want 5, got %v", got)
	}
}
