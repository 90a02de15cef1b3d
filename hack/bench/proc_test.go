/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"bufio"
	"os/exec"
	"strings"
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

func TestParseStat(t *testing.T) {
	type want struct {
		comm string
		f    []string
		ok   bool
	}
	cases := map[string]struct {
		reason string
		stat   string
		want   want
	}{
		"APIServer": {
			reason: "The name is between the parentheses; state, ppid, ... follow.",
			stat:   "4242 (kube-apiserver) S 4200 4242 4200 0 -1 4194560 1 0 0 0 310 95 0 0",
			want:   want{comm: "kube-apiserver", ok: true, f: []string{"S", "4200", "4242", "4200", "0", "-1", "4194560", "1", "0", "0", "0", "310", "95", "0", "0"}},
		},
		"SpacesAndParens": {
			reason: "A name may hold spaces and ')': it ends at the last ')'.",
			stat:   "7 (a b) c) R 1 7",
			want:   want{comm: "a b) c", ok: true, f: []string{"R", "1", "7"}},
		},
		"Garbage": {
			reason: "Text without a parenthesised name is no stat line.",
			stat:   "7 kube-apiserver S 1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			comm, f, ok := parseStat(tc.stat)
			if diff := cmp.Diff(tc.want, want{comm: comm, f: f, ok: ok}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nparseStat(%q): -want, +got:\n%s", tc.reason, tc.stat, diff)
			}
		})
	}
}

func TestChildPID(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if got := childPID("sleep"); got != cmd.Process.Pid {
		t.Errorf("childPID(\"sleep\"): want the child's pid %d, got %d", cmd.Process.Pid, got)
	}
	if got := childPID("no-such-child"); got != 0 {
		t.Errorf("childPID(\"no-such-child\"): want 0, got %d", got)
	}
}

func TestCPUMarkSince(t *testing.T) {
	cases := map[string]struct {
		reason string
		m0, m  cpuMark
		want   float64
	}{
		"Same":      {reason: "The same process: the difference.", m0: cpuMark{pid: 9, secs: 1.5}, m: cpuMark{pid: 9, secs: 4}, want: 2.5},
		"Restarted": {reason: "Another process under the name: no figure.", m0: cpuMark{pid: 9, secs: 1.5}, m: cpuMark{pid: 10, secs: 4}},
		"Missing":   {reason: "A reading that failed: no figure.", m0: cpuMark{}, m: cpuMark{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.m.since(tc.m0); got != tc.want {
				t.Errorf("%s\nsince: want %v, got %v", tc.reason, tc.want, got)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	status := "Name:\tprovider\nVmPeak:\t 2104316 kB\nVmHWM:\t  183000 kB\nVmRSS:\t  170000 kB\nRssAnon:\t  118000 kB\nRssFile:\t   52000 kB\nRssShmem:\t       0 kB\nThreads:\t12\n"
	got := parseStatus(bufio.NewScanner(strings.NewReader(status)))
	want := memKiB{peak: 183000, anon: 118000, file: 52000}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(memKiB{})); diff != "" {
		t.Errorf("parseStatus(...): -want, +got:\n%s", diff)
	}
}
