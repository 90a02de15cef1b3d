/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package exepages

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadOnlyMappings(t *testing.T) {
	const exe = "/usr/local/bin/provider"
	// As /proc/self/smaps prints them (most fields left out): the binary's
	// code, read-only data and data, the heap, a library, another binary
	// and the stack.
	smaps := `00400000-01e23000 r-xp 00000000 fd:00 1234 /usr/local/bin/provider
Size:              27148 kB
Rss:               25400 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
01e23000-04056000 r--p 01a23000 fd:00 1234 /usr/local/bin/provider
Size:              35020 kB
Anonymous:             0 kB
VmFlags: rd mr mw me
04056000-04114000 rw-p 03c56000 fd:00 1234 /usr/local/bin/provider
Anonymous:           412 kB
04114000-06800000 rw-p 00000000 00:00 0
Anonymous:          1024 kB
c000000000-c004000000 rw-p 00000000 00:00 0
Anonymous:         61440 kB
7ff71af29000-7ff71b07f000 r-xp 00028000 fd:00 99 /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
7ff71b100000-7ff71b101000 r--p 00000000 fd:00 77 /usr/local/bin/provider-other
Anonymous:             0 kB
7ffd2a000000-7ffd2a021000 rw-p 00000000 00:00 0                          [stack]
Anonymous:           132 kB
`
	// A position-independent build: the dynamic loader relocated the
	// pointers of the third range, which it then made read-only.
	pie := `561d58e6d000-561d58f1a000 r-xp 00000000 fd:00 5 /usr/local/bin/provider
Anonymous:             0 kB
561d58f1a000-561d58fff000 r--p 000ad000 fd:00 5 /usr/local/bin/provider
Anonymous:             0 kB
561d58fff000-561d59029000 r--p 00192000 fd:00 5 /usr/local/bin/provider
Anonymous:           152 kB
561d59029000-561d59035000 rw-p 001bc000 fd:00 5 /usr/local/bin/provider
Anonymous:            32 kB
`
	cases := map[string]struct {
		reason  string
		smaps   string
		exe     string
		want    []mapping
		wantErr bool
	}{
		"CodeAndReadOnlyData": {
			reason: "Only the binary's ranges that are not writable are returned; its data, the heap, libraries and other files are not.",
			smaps:  smaps,
			exe:    exe,
			want:   []mapping{{Start: 0x400000, End: 0x1e23000}, {Start: 0x1e23000, End: 0x4056000}},
		},
		"RelocatedReadOnlyData": {
			reason: "A read-only range with anonymous pages (relocated by the dynamic loader) is kept: dropping it would bring back the file's unrelocated pages.",
			smaps:  pie,
			exe:    exe,
			want:   []mapping{{Start: 0x561d58e6d000, End: 0x561d58f1a000}, {Start: 0x561d58f1a000, End: 0x561d58fff000}},
		},
		"NoAnonymousField": {
			reason: "A range whose anonymous pages are not counted might have some: it is kept.",
			smaps:  "00400000-00500000 r-xp 00000000 fd:00 1 /usr/local/bin/provider\nSize: 1024 kB\n00500000-00600000 r--p 00100000 fd:00 1 /usr/local/bin/provider\n",
			exe:    exe,
		},
		"PathWithSpace": {
			reason: "A path with a space is the rest of the line.",
			smaps:  "00400000-00500000 r-xp 00000000 fd:00 1 /opt/my bin/provider\nAnonymous: 0 kB\n",
			exe:    "/opt/my bin/provider",
			want:   []mapping{{Start: 0x400000, End: 0x500000}},
		},
		"NotMapped": {
			reason: "No range of the binary is nothing to release.",
			smaps:  smaps,
			exe:    "/bin/true",
		},
		"BadAddress": {
			reason:  "An address that is no hexadecimal number is an error, not a guess.",
			smaps:   "0040zz00-01e23000 r-xp 00000000 fd:00 1 /usr/local/bin/provider\n",
			exe:     exe,
			wantErr: true,
		},
		"EmptyRange": {
			reason:  "A range that ends where it starts is an error.",
			smaps:   "00400000-00400000 r-xp 00000000 fd:00 1 /usr/local/bin/provider\n",
			exe:     exe,
			wantErr: true,
		},
		"AnonymousWithoutValue": {
			reason:  "An Anonymous field without its count is an error.",
			smaps:   "00400000-00500000 r-xp 00000000 fd:00 1 /usr/local/bin/provider\nAnonymous:\n",
			exe:     exe,
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := readOnlyMappings(strings.NewReader(tc.smaps), tc.exe)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nreadOnlyMappings(...): error %v, want error %t", tc.reason, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nreadOnlyMappings(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
