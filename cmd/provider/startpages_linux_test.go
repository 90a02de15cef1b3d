/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFile reads the process's resident file-backed pages, in kB.
func rssFile(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

func TestReleaseStartupPages(t *testing.T) {
	before := rssFile(t)
	n, err := releaseStartupPages()
	if err != nil {
		t.Fatalf("releaseStartupPages(): %v", err)
	}
	after := rssFile(t)
	t.Logf("released %d bytes of address space; RssFile %d kB before, %d kB after", n, before, after)
	// This test binary holds most of the provider's packages, and init
	// made most of it resident, as it does the provider's (~90% here).
	if n == 0 || after >= before {
		t.Errorf("releaseStartupPages(): RssFile %d kB before, %d kB after: want less", before, after)
	}
}
