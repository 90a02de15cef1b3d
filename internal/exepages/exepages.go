/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package exepages releases the process's mappings of its own executable's
// code and read-only data.
//
// Why the provider releases them once it has started: the binary is
// ~60 MB of code and read-only data from ~1100 packages, and each
// package's init runs code and reads data in its own part of it. The
// kernel maps a page's neighbours along with it (fault-around: ~100 KiB a
// fault here), so by the time the manager runs nearly the whole binary is
// mapped: ~50 MiB of the process's RSS (docs/bench.md at 22cd24f, "startup pages").
// Dropping the mappings (MADV_DONTNEED: the pages stay in the page cache,
// and what runs again is mapped again on first touch, a minor fault) leaves
// the process holding what it uses, 34-40 MiB with its neighbours, and the
// rest as unmapped page cache, which the kernel reclaims before mapped
// pages under memory pressure.
package exepages

import (
	"bufio"
	"io"
	"strconv"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

const errParseMaps = "cannot parse a line of /proc/self/smaps"

// mapping is one range of /proc/self/smaps.
type mapping struct {
	Start, End uintptr
}

// readOnlyMappings returns the ranges in smaps (the format of
// /proc/self/smaps) that map the file exe, are not writable and hold only
// the file's pages: the binary's code and read-only data. Writable ranges
// (its data, which the process changes) are left out: dropping them would
// lose what it wrote. So are read-only ranges with anonymous pages, or
// whose count of them is missing: in a position-independent build the
// dynamic loader relocates pointers in a range it then makes read-only
// (RELRO), and dropping those pages would map the file's unrelocated ones
// back in their place.
func readOnlyMappings(smaps io.Reader, exe string) ([]mapping, error) {
	var out []mapping
	// cur is the binary's read-only range whose fields are being read,
	// until its Anonymous field says whether it is the file's only.
	var cur *mapping
	s := bufio.NewScanner(smaps)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) == 0 {
			continue
		}
		if strings.HasSuffix(f[0], ":") {
			// "Anonymous:  152 kB", a field of the range above.
			if cur != nil && f[0] == "Anonymous:" {
				if len(f) < 2 {
					return nil, errors.New(errParseMaps)
				}
				if f[1] == "0" {
					out = append(out, *cur)
				}
				cur = nil
			}
			continue
		}
		// address perms offset dev inode pathname
		cur = nil
		if len(f) < 6 || strings.Join(f[5:], " ") != exe {
			continue
		}
		if len(f[1]) < 2 || f[1][1] == 'w' || f[1][0] != 'r' {
			continue
		}
		start, end, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, errors.New(errParseMaps)
		}
		a, err := strconv.ParseUint(start, 16, 64)
		if err != nil {
			return nil, errors.Wrap(err, errParseMaps)
		}
		b, err := strconv.ParseUint(end, 16, 64)
		if err != nil || b <= a {
			return nil, errors.New(errParseMaps)
		}
		cur = &mapping{Start: uintptr(a), End: uintptr(b)}
	}
	return out, errors.Wrap(s.Err(), errParseMaps)
}
