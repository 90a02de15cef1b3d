/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestQuantiles(t *testing.T) {
	inf := math.Inf(1)
	cases := map[string]struct {
		reason  string
		buckets map[float64]float64
		want    lagQuantiles
	}{
		"None": {
			reason: "No write observed: no quantiles.",
			want:   lagQuantiles{},
		},
		"Empty": {
			reason:  "Buckets of zero: no quantiles.",
			buckets: map[float64]float64{0.1: 0, 1: 0, inf: 0},
			want:    lagQuantiles{},
		},
		"Interpolated": {
			reason:  "Linear within the bucket holding the rank, from 0 in the lowest.",
			buckets: map[float64]float64{0.1: 50, 1: 90, 10: 99, inf: 100},
			want:    lagQuantiles{writes: 100, p50: 0.1, p90: 1, p99: 10},
		},
		"Within": {
			reason:  "A rank within a bucket is interpolated between its bounds.",
			buckets: map[float64]float64{1: 0, 2: 100, inf: 100},
			want:    lagQuantiles{writes: 100, p50: 1.5, p90: 1.9, p99: 1.99},
		},
		"Inf": {
			reason:  "A rank in the +Inf bucket is +Inf: longer than the largest bound.",
			buckets: map[float64]float64{30: 10, inf: 100},
			want:    lagQuantiles{writes: 100, p50: inf, p90: inf, p99: inf},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := quantiles(tc.buckets)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(lagQuantiles{}), cmp.Comparer(func(a, b float64) bool {
				return a == b || math.Abs(a-b) < 1e-9
			})); diff != "" {
				t.Errorf("%s\nquantiles(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
