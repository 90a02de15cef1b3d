/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadOnlyMappings(t *testing.T) {
	const exe = "/usr/local/bin/provider"
	// As /proc/self/maps prints them: the binary's code, read-only data and
	// data, the heap, a library and an anonymous range.
	maps := `00400000-01e23000 r-xp 00000000 fd:00 1234 /usr/local/bin/provider
01e23000-04056000 r--p 01a23000 fd:00 1234 /usr/local/bin/provider
04056000-04114000 rw-p 03c56000 fd:00 1234 /usr/local/bin/provider
04114000-06800000 rw-p 00000000 00:00 0
c000000000-c004000000 rw-p 00000000 00:00 0
7ff71af29000-7ff71b07f000 r-xp 00028000 fd:00 99 /usr/lib/x86_64-linux-gnu/libc.so.6
7ff71b100000-7ff71b101000 r--p 00000000 fd:00 77 /usr/local/bin/provider-other
7ffd2a000000-7ffd2a021000 rw-p 00000000 00:00 0 [stack]
`
	cases := map[string]struct {
		reason  string
		maps    string
		exe     string
		want    []mapping
		wantErr bool
	}{
		"CodeAndReadOnlyData": {
			reason: "Only the binary's ranges that are not writable are returned; its data, the heap, libraries and other files are not.",
			maps:   maps,
			exe:    exe,
			want:   []mapping{{Start: 0x400000, End: 0x1e23000}, {Start: 0x1e23000, End: 0x4056000}},
		},
		"PathWithSpace": {
			reason: "A path with a space is the rest of the line.",
			maps:   "00400000-00500000 r-xp 00000000 fd:00 1 /opt/my bin/provider\n",
			exe:    "/opt/my bin/provider",
			want:   []mapping{{Start: 0x400000, End: 0x500000}},
		},
		"NotMapped": {
			reason: "No range of the binary is nothing to release.",
			maps:   maps,
			exe:    "/bin/true",
		},
		"BadAddress": {
			reason:  "An address that is no hexadecimal number is an error, not a guess.",
			maps:    "0040zz00-01e23000 r-xp 00000000 fd:00 1 /usr/local/bin/provider\n",
			exe:     exe,
			wantErr: true,
		},
		"EmptyRange": {
			reason:  "A range that ends where it starts is an error.",
			maps:    "00400000-00400000 r-xp 00000000 fd:00 1 /usr/local/bin/provider\n",
			exe:     exe,
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := readOnlyMappings(strings.NewReader(tc.maps), tc.exe)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nreadOnlyMappings(...): error %v, want error %t", tc.reason, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nreadOnlyMappings(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
