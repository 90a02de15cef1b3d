/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMemoryLimit(t *testing.T) {
	limited := func() (int64, bool) { return 200 << 20, true }
	unlimited := func() (int64, bool) { return 0, false }
	cases := map[string]struct {
		reason    string
		flag      string
		container func() (int64, bool)
		want      int64
		wantErr   bool
	}{
		"Off":         {reason: "0 is no limit.", flag: "0", container: limited, want: 0},
		"Mebibytes":   {reason: "A quantity in Mi is bytes.", flag: "96Mi", container: limited, want: 96 << 20},
		"Auto":        {reason: "auto is 80% of the container's limit.", flag: "auto", container: limited, want: 160 << 20},
		"AutoNoLimit": {reason: "auto in a container without a limit is no limit.", flag: "auto", container: unlimited, want: 0},
		"Negative":    {reason: "A negative limit is refused.", flag: "-1Mi", container: limited, wantErr: true},
		"Garbage":     {reason: "A value that is no quantity is refused.", flag: "lots", container: limited, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := memoryLimit(tc.flag, tc.container)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nmemoryLimit(%q): error %v, want error %t", tc.reason, tc.flag, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nmemoryLimit(%q): -want, +got:\n%s", tc.reason, tc.flag, diff)
			}
		})
	}
}

func TestSetMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	cases := map[string]struct {
		reason string
		limit  int64
		env    string
		want   bool
	}{
		"Set":             {reason: "A limit is set.", limit: 96 << 20, want: true},
		"Off":             {reason: "0 sets nothing.", limit: 0},
		"EnvironmentWins": {reason: "GOMEMLIMIT in the environment wins.", limit: 96 << 20, env: "200MiB"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			got := setMemoryLimit(tc.limit, tc.env)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nsetMemoryLimit(): -want, +got:\n%s", tc.reason, diff)
			}
			want := int64(math.MaxInt64)
			if tc.want {
				want = tc.limit
			}
			if diff := cmp.Diff(want, debug.SetMemoryLimit(-1)); diff != "" {
				t.Errorf("%s\nthe runtime's limit: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
