/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/api/resource"
)

const errFmtMemoryLimit = "--memory-limit %q: want auto, 0 or a quantity of bytes, such as 96Mi"

// memoryLimitAuto takes the soft limit from the container's memory limit.
const memoryLimitAuto = "auto"

// autoFraction of the container's memory limit is the heap's soft limit:
// the rest is the binary's pages, stacks and what the runtime keeps aside.
const autoFraction = 0.8

// cgroupMemoryMax is where cgroup v2 keeps the container's memory limit
// ("max" when there is none).
const cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// memoryLimit parses --memory-limit into bytes; 0 is no limit. auto is
// autoFraction of what containerLimit reads, when the container has one.
func memoryLimit(flag string, containerLimit func() (int64, bool)) (int64, error) {
	if flag == memoryLimitAuto {
		if l, ok := containerLimit(); ok {
			return int64(float64(l) * autoFraction), nil
		}
		return 0, nil
	}
	q, err := resource.ParseQuantity(flag)
	if err != nil || q.Sign() < 0 {
		return 0, errors.Errorf(errFmtMemoryLimit, flag)
	}
	return q.Value(), nil
}

// cgroupLimit reads the container's memory limit from cgroup v2.
func cgroupLimit() (int64, bool) {
	b, err := os.ReadFile(cgroupMemoryMax)
	if err != nil {
		return 0, false
	}
	l, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return l, err == nil && l > 0
}

// setMemoryLimit makes limit the soft limit of the Go heap, unless the
// environment has one (GOMEMLIMIT, which the runtime read at start). The
// collector otherwise lets the heap grow to twice what is live after each
// collection (GOGC=100): while 1000 new resources converge that is the
// garbage of decoding and copying them, and most of the peak RSS. Near the
// limit it collects more often instead; it never fails an allocation, and
// caps its own CPU when the live heap outgrows the limit.
func setMemoryLimit(limit int64, env string) bool {
	if limit <= 0 || env != "" {
		return false
	}
	debug.SetMemoryLimit(limit)
	return true
}
