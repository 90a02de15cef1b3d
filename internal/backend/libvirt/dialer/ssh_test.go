/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package dialer

import (
	"strings"
	"testing"

	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/egressproxy/provider-egressproxy/internal/backend/libvirt/dialer/dialertest"
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
