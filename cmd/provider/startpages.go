/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"bufio"
	"context"
	"io"
	"strconv"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
)

// Why the provider releases pages of its own binary once it has started:
// the binary is ~60 MB of code and read-only data from ~1100 packages, and
// each package's init runs code and reads data in its own part of it. The
// kernel maps a page's neighbours along with it (fault-around: ~100 KiB a
// fault here), so by the time the manager runs nearly the whole binary is
// mapped: ~50 MiB of the process's RSS (docs/bench.md, "startup pages").
// Dropping the mappings (MADV_DONTNEED: the pages stay in the page cache,
// and what runs again is mapped again on first touch, a minor fault) leaves
// the process holding what it uses, 34-40 MiB with its neighbours, and the
// rest as unmapped page cache, which the kernel reclaims before mapped
// pages under memory pressure.

const errParseMaps = "cannot parse a line of /proc/self/maps"

// mapping is one range of /proc/self/maps.
type mapping struct {
	Start, End uintptr
}

// readOnlyMappings returns the ranges in maps (the format of
// /proc/self/maps) that map the file exe and are not writable: the
// binary's code and read-only data. Writable ranges (its data, which the
// process changes) are left out: dropping them would lose what it wrote.
func readOnlyMappings(maps io.Reader, exe string) ([]mapping, error) {
	var out []mapping
	s := bufio.NewScanner(maps)
	for s.Scan() {
		// address perms offset dev inode pathname
		f := strings.Fields(s.Text())
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
		out = append(out, mapping{Start: uintptr(a), End: uintptr(b)})
	}
	return out, errors.Wrap(s.Err(), errParseMaps)
}

// startupPages releases the startup pages once the manager's caches have
// synced: by then every package's init has run and the informers have
// listed, and what the controllers use maps itself back.
type startupPages struct {
	cache interface {
		WaitForCacheSync(ctx context.Context) bool
	}
	log logging.Logger
}

// NeedLeaderElection is false: a standby replica holds the same pages.
func (startupPages) NeedLeaderElection() bool { return false }

func (s startupPages) Start(ctx context.Context) error {
	if !s.cache.WaitForCacheSync(ctx) {
		return nil
	}
	n, err := releaseStartupPages()
	if err != nil {
		// Only memory is at stake: say so and go on.
		s.log.Info("Cannot release the binary's startup pages", "error", err)
		return nil
	}
	s.log.Debug("Released the binary's startup pages", "bytes", n)
	return nil
}
