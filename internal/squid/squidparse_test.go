/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// knownWarning is the one squid diagnostic a rendered config is expected to
// cause: "via off" is a requirement (no client details leak), and squid
// warns that HTTP wants a Via header.
const knownWarning = "WARNING: HTTP requires the use of Via"

// squidBinary returns the squid program, or marks the test Missing.
func squidBinary(t *testing.T) string {
	t.Helper()
	bin := testenv.LookPath(t, "squid", "Debian package squid: hack/deps.sh squid")
	if _, err := os.Stat(DefaultAuthHelper); err != nil {
		testenv.Missing(t, "%s not found (hack/deps.sh squid)", DefaultAuthHelper)
	}
	return bin
}

// parseWithSquid fails the test unless `squid -k parse` accepts conf without
// an error or an unexpected warning.
func parseWithSquid(t *testing.T, bin string, conf []byte) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "squid.conf")
	if err := os.WriteFile(f, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-k", "parse", "-f", f).CombinedOutput() //nolint:gosec // The test's own squid and file.
	if err != nil {
		t.Fatalf("squid -k parse: %v\n%s\nconfig:\n%s", err, out, conf)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, "ERROR") && !strings.Contains(line, "WARNING") && !strings.Contains(line, "FATAL") {
			continue
		}
		if !strings.Contains(line, knownWarning) {
			t.Errorf("squid -k parse: unexpected diagnostic: %s\nconfig:\n%s", line, conf)
		}
	}
}

// TestRenderParsesWithSquid runs the real squid's parser over every config
// the table tests render.
func TestRenderParsesWithSquid(t *testing.T) {
	bin := squidBinary(t)
	for name, tc := range renderCases() {
		t.Run(name, func(t *testing.T) {
			conf, err := Render(tc.c)
			if err != nil {
				t.Fatalf("Render(...): %v", err)
			}
			parseWithSquid(t, bin, conf)
		})
	}
	t.Run("Golden", func(t *testing.T) {
		conf, err := os.ReadFile(filepath.Join("testdata", "typical.conf"))
		if err != nil {
			t.Fatal(err)
		}
		parseWithSquid(t, bin, conf)
	})
}
