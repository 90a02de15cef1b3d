/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package exepages

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
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

func TestRelease(t *testing.T) {
	before := rssFile(t)
	n, err := Release()
	if err != nil {
		t.Fatalf("Release(): %v", err)
	}
	after := rssFile(t)
	t.Logf("released %d bytes of address space; RssFile %d kB before, %d kB after", n, before, after)
	// Init and the testing package made much of this test binary
	// resident, as init does most of the provider's.
	if n == 0 || after >= before {
		t.Errorf("Release(): RssFile %d kB before, %d kB after: want less", before, after)
	}
}

// TestReleasePositionIndependent: in a position-independent build the
// dynamic loader relocates pointers in pages it then makes read-only;
// releasing those would map the file's unrelocated pages back, and the
// process would crash on its next read of a type descriptor.
func TestReleasePositionIndependent(t *testing.T) {
	goBin := testenv.LookPath(t, "go", "to build testdata/pie position-independent")
	bin := filepath.Join(t.TempDir(), "pie")
	build := exec.Command(goBin, "build", "-buildmode=pie", "-o", bin, "./testdata/pie") //nolint:gosec // The go command and this test's program.
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildmode=pie: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).CombinedOutput() //nolint:gosec // The program built above.
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("a position-independent program that released its pages: %v\n%s", err, out)
	}
}
