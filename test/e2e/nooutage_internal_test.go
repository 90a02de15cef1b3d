/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/traffic"
)

// TestFailures pins what the no-outage spec counts as an outage.
func TestFailures(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 13, 0, 0, 0, time.UTC)
	rec := func(ms int, probe string, code int) traffic.Record {
		return traffic.Record{At: t0.Add(time.Duration(ms) * time.Millisecond), Probe: probe, Code: code}
	}
	either := outage{eitherOK: true}
	cases := map[string]struct {
		reason  string
		records []traffic.Record
		o       outage
		want    []string
	}{
		"SparseButServed": {
			reason:  "A gap between 200s with only one password refused in it is sampling, not an outage.",
			records: []traffic.Record{rec(0, "old", 200), rec(1500, "new", 407), rec(3000, "old", 200), rec(5500, "new", 200)},
			o:       either,
		},
		"BothRefusedBriefly": {
			reason:  "Both passwords refused for less than maxRefusedWindow is tolerated.",
			records: []traffic.Record{rec(0, "old", 407), rec(500, "new", 407), rec(3400, "new", 200)},
			o:       either,
		},
		"BothRefused": {
			reason:  "Both passwords refused for longer than maxRefusedWindow is an outage.",
			records: []traffic.Record{rec(0, "old", 200), rec(100, "old", 407), rec(900, "new", 407), rec(10500, "new", 200)},
			o:       either,
			want:    []string{"13:00:10.500: every password refused for 10.4s"},
		},
		"StableRefused": {
			reason:  "A probe both configurations allow must always get 200; errors and 5xx always fail.",
			records: []traffic.Record{rec(0, "stable", 200), rec(100, "stable", 403), {At: t0, Probe: "added", Err: errors.New("reset")}, rec(200, "added", http.StatusBadGateway)},
			o:       outage{alwaysOK: map[string]bool{"stable": true}},
			want:    []string{"13:00:00.000 added: reset", "13:00:00.100 stable: 403, want 200", "13:00:00.200 added: 502"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, failures(tc.records, tc.o)); diff != "" {
				t.Errorf("%s\nfailures(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
