/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package libvirtd

import (
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/dialer"
)

// TestSSHDPinsHostKey reaches the sandbox's daemon over qemu+ssh through
// its real sshd with the provider's dialer, as the e2e's provider pod does:
// only with the host key known_hosts lists for the address dialled.
func TestSSHDPinsHostKey(t *testing.T) {
	d := Start(t)
	start := time.Now()
	s := d.StartSSHD(t)
	t.Logf("sshd up (a login that opened the socket): %s", time.Since(start).Round(time.Millisecond))
	addr := forwardToSSHD(t, s)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	otherKey, err := ssh.NewSignerFromKey(other)
	if err != nil {
		t.Fatal(err)
	}
	host := knownhosts.Normalize(addr)
	cases := map[string]struct {
		knownHosts []byte
		// wantErr is in the error; "" means the call works.
		wantErr string
	}{
		"TheHostKeyPinnedForTheAddress": {knownHosts: s.KnownHostsFor(addr)},
		"AnotherKeyForTheAddress": {
			knownHosts: []byte(knownhosts.Line([]string{host}, otherKey.PublicKey()) + "\n"),
			wantErr:    "host key of " + host + " is not the one known_hosts lists",
		},
		"TheKeyForAnotherNameOnly": {
			knownHosts: []byte(knownhosts.Line([]string{"libvirt.example.com"}, s.HostKey) + "\n"),
			wantErr:    "known_hosts has no key for " + host,
		},
	}
	uri := "test+ssh://" + SSHUser + "@" + addr + "/default?socket=" + url.QueryEscape(d.Socket)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := libvirtVersion(dialer.Target{URI: uri, Credentials: dialer.Credentials{SSHPrivateKey: s.PrivateKey, KnownHosts: tc.knownHosts}})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("%s: %v", uri, err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("%s: no error, want one with %q", uri, tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("%s: %v, want an error with %q", uri, err, tc.wantErr)
			}
		})
	}
	b, _ := os.ReadFile(s.Log)
	// The start's probe and the pinned case; the refused ones never got to
	// authenticate.
	if n := strings.Count(string(b), "Accepted publickey for "+SSHUser); n != 2 {
		t.Errorf("sshd logged %d logins, want 2:\n%s", n, b)
	}
}

// libvirtVersion connects through the provider's dialer and asks the
// daemon for its version.
func libvirtVersion(target dialer.Target) error {
	d, uri, err := dialer.New(target)
	if err != nil {
		return err
	}
	l := libvirt.NewWithDialer(d)
	if err := l.ConnectToURI(uri); err != nil {
		return err
	}
	defer l.Disconnect() //nolint:errcheck // Read only.
	_, err = l.ConnectGetLibVersion()
	return err
}

// forwardToSSHD listens on the host's loopback and relays each connection
// to sshd in the sandbox, as the e2e's forwarder does from the node's
// address. It returns the address.
func forwardToSSHD(t *testing.T, s *SSHD) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close() //nolint:errcheck // Either side may close first.
				out, err := s.Dial()
				if err != nil {
					return
				}
				defer out.Close() //nolint:errcheck // Either side may close first.
				go func() { _, _ = io.Copy(out, in) }()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
	return l.Addr().String()
}
