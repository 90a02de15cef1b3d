/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package dialer

import (
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/dialer/dialertest"
)

func sshCreds(s dialertest.SSHServer) Credentials {
	return Credentials{SSHPrivateKey: s.PrivateKey, KnownHosts: s.KnownHosts}
}

func TestSSHDial(t *testing.T) {
	srv := dialertest.NewSSHServer(t, echoServer(t))
	d, uri, err := New(Target{URI: "qemu+ssh://root@" + srv.Addr + "/system", Credentials: sshCreds(srv)})
	if err != nil {
		t.Fatal(err)
	}
	if uri != "qemu:///system" {
		t.Errorf("remote URI: got %q", uri)
	}
	roundTrip(t, d)
}

func TestSSHHostKeyMismatch(t *testing.T) {
	srv := dialertest.NewSSHServer(t, echoServer(t))
	other := dialertest.NewSSHServer(t, "")
	// known_hosts lists another key for the server's address.
	creds := sshCreds(srv)
	creds.KnownHosts = []byte(knownhosts.Line([]string{knownhosts.Normalize(srv.Addr)}, other.HostKey) + "\n")
	d, _, err := New(Target{URI: "qemu+ssh://root@" + srv.Addr + "/system", Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Dial()
	if err == nil {
		_ = c.Close()
		t.Fatal("Dial succeeded with a host key known_hosts does not list")
	}
	if !strings.Contains(err.Error(), "key mismatch") {
		t.Errorf("Dial: want a key mismatch error, got %v", err)
	}
}

func TestSSHWrongClientKey(t *testing.T) {
	srv := dialertest.NewSSHServer(t, echoServer(t))
	other := dialertest.NewSSHServer(t, "")
	creds := sshCreds(srv)
	creds.SSHPrivateKey = other.PrivateKey
	d, _, err := New(Target{URI: "qemu+ssh://root@" + srv.Addr + "/system", Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := d.Dial(); err == nil {
		_ = c.Close()
		t.Fatal("Dial succeeded with a key the server does not accept")
	}
}

// silentServer accepts TCP connections and never writes a byte, as a host
// with a wedged sshd does. It returns its address and the connections it
// accepted, which report the end of each.
func silentServer(t *testing.T) (string, <-chan net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
			accepted <- c
		}
	}()
	return l.Addr().String(), accepted
}

func TestSSHSilentHost(t *testing.T) {
	keys := dialertest.NewSSHServer(t, "")
	addr, accepted := silentServer(t)
	creds := sshCreds(keys)
	creds.KnownHosts = []byte(knownhosts.Line([]string{knownhosts.Normalize(addr)}, keys.HostKey) + "\n")
	d, _, err := New(Target{URI: "qemu+ssh://root@" + addr + "/system", Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	const bound = 300 * time.Millisecond
	d.(*sshDialer).timeout = bound
	before := runtime.NumGoroutine()

	errs := make(chan error, 1)
	start := time.Now()
	go func() {
		c, err := d.Dial()
		if err == nil {
			_ = c.Close()
		}
		errs <- err
	}()
	select {
	case err := <-errs:
		if err == nil {
			t.Fatal("Dial to a host that never answers succeeded")
		}
		t.Logf("Dial gave up after %v: %v", time.Since(start), err)
	case <-time.After(10 * bound):
		t.Fatalf("Dial to a host that never sends a banner still running after %v", 10*bound)
	}

	// The client closed its socket: past its banner, the server reads EOF.
	c := <-accepted
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Errorf("server read after Dial gave up: %v, want EOF (the client's socket leaked)", err)
	}
	// And no goroutine of the dial is left.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Dial gave up, %d before: the dial leaked", n, before)
	}
}
