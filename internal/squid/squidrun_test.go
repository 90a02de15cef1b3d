/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	squidReadyTimeout = 30 * time.Second
	squidStopTimeout  = 15 * time.Second
)

// squidDir is a private folder for one squid run. As root, squid drops to
// user proxy, which must be able to write its logs and pid file there and to
// read the config, hosts and htpasswd files; t.TempDir's parents are 0700,
// so the folder is made by hand.
type squidDir struct {
	path     string
	uid, gid int // -1 when not running as root
}

func newSquidDir(t *testing.T) squidDir {
	t.Helper()
	p, err := os.MkdirTemp("", "egressproxy-squid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(p) })
	d := squidDir{path: p, uid: -1, gid: -1}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("proxy")
		if err != nil {
			t.Fatalf("running as root, but there is no user proxy for squid to drop to: %v", err)
		}
		d.uid, _ = strconv.Atoi(u.Uid)
		d.gid, _ = strconv.Atoi(u.Gid)
	}
	if err := os.Chmod(p, 0o755); err != nil { //nolint:gosec // squid's user must traverse it.
		t.Fatal(err)
	}
	if err := os.Chown(p, d.uid, d.gid); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d squidDir) file(name string) string { return filepath.Join(d.path, name) }

// write writes a file squid (or its helper) reads, the way a Secret or
// cloud-init would: readable by group proxy only when it is a secret.
func (d squidDir) write(t *testing.T, name string, data []byte, mode os.FileMode) string {
	t.Helper()
	f := d.file(name)
	tmp := f + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, -1, d.gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f); err != nil {
		t.Fatal(err)
	}
	return f
}

// syncBuffer collects squid's stderr for failure messages.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startSquid runs `squid -N -f conf` until the test ends and waits until it
// accepts connections on addr.
func startSquid(t *testing.T, bin string, d squidDir, conf []byte, addr string) {
	t.Helper()
	f := d.write(t, "squid.conf", conf, 0o644)
	var stderr syncBuffer
	cmd := exec.Command(bin, "-N", "-f", f) //nolint:gosec,noctx // The test's own squid; stopped by PID below.
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start squid: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() { stopSquid(t, cmd.Process, exited) })

	deadline := time.Now().Add(squidReadyTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		select {
		case <-exited:
			t.Fatalf("squid exited before it was ready:\n%s\ncache.log:\n%s", stderr.String(), readFile(d.file("cache.log")))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("squid not ready on %s after %s:\n%s\ncache.log:\n%s", addr, squidReadyTimeout, stderr.String(), readFile(d.file("cache.log")))
		}
	}
}

// stopSquid interrupts squid (SIGINT shuts down without waiting for
// shutdown_lifetime) and kills it if it does not exit in time. Its auth
// helpers exit when squid closes their stdin.
func stopSquid(t *testing.T, p *os.Process, exited <-chan struct{}) {
	_ = p.Signal(syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(squidStopTimeout):
		t.Logf("squid (pid %d) ignored SIGINT for %s; killing it", p.Pid, squidStopTimeout)
		_ = p.Kill()
		<-exited
	}
}

func readFile(name string) string {
	b, _ := os.ReadFile(name) //nolint:gosec // A test's own log file.
	return string(b)
}

// freeLoopbackPort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freeLoopbackPort(t *testing.T) int32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return int32(l.Addr().(*net.TCPAddr).Port) //nolint:gosec,forcetypeassert // A TCP listener's port fits.
}
