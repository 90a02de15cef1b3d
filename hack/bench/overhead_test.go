/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSummarize(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, 0, len(v))
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 0, 100)
	for i := 100; i >= 1; i-- {
		hundred = append(hundred, i)
	}
	cases := map[string]struct {
		reason string
		c      cell
		want   figures
	}{
		"Empty": {
			reason: "No samples give zero percentiles and rate, not a panic.",
			c:      cell{errors: 3},
			want:   figures{Errors: 3},
		},
		"One": {
			reason: "One sample is every percentile.",
			c:      cell{samples: ms(7), elapsed: time.Second},
			want:   figures{OK: 1, RPS: 1, P50: 7 * time.Millisecond, P99: 7 * time.Millisecond},
		},
		"Unsorted": {
			reason: "Samples arrive in any order; p50 of four is the second smallest (nearest rank), p99 the largest.",
			c:      cell{samples: ms(40, 10, 30, 20), errors: 1, elapsed: 2 * time.Second},
			want:   figures{OK: 4, Errors: 1, RPS: 2, P50: 20 * time.Millisecond, P99: 40 * time.Millisecond},
		},
		"Hundred": {
			reason: "Of 1..100 ms the p50 is 50 ms and the p99 99 ms; errors do not count as requests per second.",
			c:      cell{samples: ms(hundred...), errors: 5, elapsed: 4 * time.Second},
			want:   figures{OK: 100, Errors: 5, RPS: 25, P50: 50 * time.Millisecond, P99: 99 * time.Millisecond},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := append([]time.Duration(nil), tc.c.samples...)
			got := summarize(tc.c)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nsummarize(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(in, tc.c.samples); diff != "" {
				t.Errorf("summarize sorted the caller's samples: -before, +after:\n%s", diff)
			}
		})
	}
}

func TestLogLines(t *testing.T) {
	c := cell{samples: ms3(), errors: 2, dials: 4}
	cases := map[string]struct {
		reason string
		m      mode
		want   uint64
	}{
		"HTTP":    {"squid logs every plain HTTP request, answered or not.", mode{keepAlive: true}, 5},
		"CONNECT": {"squid logs a CONNECT tunnel once, when it closes, however many requests went through it.", mode{connect: true, keepAlive: true}, 4},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, logLines(tc.m, c)); diff != "" {
				t.Errorf("\n%s\nlogLines(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func ms3() []time.Duration {
	return []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond}
}
