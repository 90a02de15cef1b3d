/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package node

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestAbortCommand checks that the watchdog's command is one line of valid
// sh, and that a node that is not running has none.
func TestAbortCommand(t *testing.T) {
	if got := (&Node{}).AbortCommand(); got != "" {
		t.Errorf("a stopped node: want no command, got %q", got)
	}
	holder := exec.Command("sleep", "60")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
	n := &Node{holder: holder, cgroup: "egressproxy-test", dir: t.TempDir()}
	cmd := n.AbortCommand()
	if cmd == "" || strings.Contains(cmd, "\n") {
		t.Fatalf("want one line, got %q", cmd)
	}
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	if out, err := exec.Command("/bin/sh", "-n", "-c", cmd).CombinedOutput(); err != nil {
		t.Errorf("sh -n: %v\n%s\n%s", err, out, cmd)
	}
}
