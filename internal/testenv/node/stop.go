/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package node

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Stop stops the node and removes everything it made. The pods' mounts,
// network namespaces and the bridge vanish with the node's namespaces;
// processes and cgroups do not, so Stop ends them itself.
func (n *Node) Stop() {
	if n.holder == nil || n.holder.Process == nil {
		return
	}
	start := time.Now()
	// The kubelet first (SIGTERM), so it restarts nothing.
	for i := len(n.procs) - 1; i >= 0; i-- {
		stopProc(n.procs[i])
	}
	// The pods' processes run in mount namespaces of their own, but in the
	// kubelet's cgroups.
	for range 20 {
		if killCgroupProcs(n.cgroup) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// containerd's shims are still in the node's mount namespace.
	for range 20 {
		if n.killNamespaceProcs() == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	removeCgroups(n.cgroup)
	for _, l := range n.listeners {
		_ = l.Close()
	}
	_ = n.holder.Process.Kill()
	_ = n.holder.Wait()
	n.holder = nil
	for i := len(n.created) - 1; i >= 0; i-- {
		_ = os.Remove(n.created[i])
	}
	_ = os.RemoveAll(n.dir)
	n.logf("node %s stopped in %s", n.Name, time.Since(start).Round(time.Millisecond))
}

// stopProc sends SIGTERM, then SIGKILL after a grace period.
func stopProc(p *proc) {
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// killNamespaceProcs kills every process in the node's mount namespace but
// the holder, and returns how many it found.
func (n *Node) killNamespaceProcs() int {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", n.holder.Process.Pid))
	if err != nil {
		return 0
	}
	found := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == n.holder.Process.Pid {
			continue
		}
		if l, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "mnt")); err == nil && l == ns {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			found++
		}
	}
	return found
}

// cgroupDirs returns the node's cgroup folders (the kubelet's cgroupRoot
// and everything below) in every hierarchy, deepest first.
func cgroupDirs(root string) []string {
	var dirs []string
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + root)
	seen := map[string]bool{}
	for _, r := range roots {
		real, err := filepath.EvalSymlinks(r)
		if err != nil || seen[real] {
			continue
		}
		seen[real] = true
		_ = filepath.WalkDir(real, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	return dirs
}

// killCgroupProcs kills every process in the node's cgroups and returns
// how many it found.
func killCgroupProcs(root string) int {
	found := 0
	for _, d := range cgroupDirs(root) {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")) //nolint:gosec // cgroupfs.
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				found++
			}
		}
	}
	return found
}

func removeCgroups(root string) {
	if root == "" {
		return
	}
	for range 10 {
		left := 0
		for _, d := range cgroupDirs(root) {
			if os.Remove(d) != nil {
				left++
			}
		}
		if left == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// AbortCommand returns a shell command line that does what Stop does, for a
// watchdog to run when the process that started the node died without
// stopping it: it kills every process in the node's mount namespace (the
// holder, containerd's shims) and in its cgroups (the pods), then removes
// the cgroups and the node's folder. Empty when the node is not running.
func (n *Node) AbortCommand() string {
	if n.holder == nil || n.holder.Process == nil {
		return ""
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", n.holder.Process.Pid))
	if err != nil || ns == "" {
		return ""
	}
	cg := "/sys/fs/cgroup/*/" + n.cgroup
	// One line: the watchdog reads one command a line.
	return fmt.Sprintf(`for p in /proc/[0-9]*; do [ "$(readlink $p/ns/mnt 2>/dev/null)" = %q ] && kill -9 ${p#/proc/} 2>/dev/null; done; `+
		`for f in $(find %s -name cgroup.procs 2>/dev/null); do kill -9 $(cat $f) 2>/dev/null; done; sleep 1; `+
		`find %s -depth -type d -exec rmdir {} + 2>/dev/null; rm -rf %q; true`, ns, cg, cg, n.dir)
}
