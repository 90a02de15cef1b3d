/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package exepages

import (
	"os"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"golang.org/x/sys/unix"
)

const (
	errReadMaps = "cannot read /proc/self/smaps"
	errExe      = "cannot resolve /proc/self/exe"
	errMadvise  = "cannot release the binary's pages"
)

// Release drops the process's mappings of its binary's code and read-only
// data (the package's doc says why). It returns how many bytes
// of address space it released; what was resident of them is what the
// process's RssFile drops by.
func Release() (uintptr, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, errors.Wrap(err, errExe)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, errors.Wrap(err, errReadMaps)
	}
	defer f.Close() //nolint:errcheck // Only read.
	ms, err := readOnlyMappings(f, exe)
	if err != nil {
		return 0, err
	}
	var n uintptr
	for _, m := range ms {
		// Address and length as the kernel's smaps gave them, page aligned;
		// a raw syscall, as unix.Madvise takes a slice.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.Start, m.End-m.Start, unix.MADV_DONTNEED); errno != 0 {
			return n, errors.Wrap(errno, errMadvise)
		}
		n += m.End - m.Start
	}
	return n, nil
}
