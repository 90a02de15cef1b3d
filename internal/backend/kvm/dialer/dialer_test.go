/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package dialer

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/dialer/dialertest"
)

func TestNew(t *testing.T) {
	ssh := dialertest.NewSSHServer(t, "")
	tlsCreds := tlsCreds(dialertest.NewPKI(t))
	type want struct {
		Kind  string
		URI   golibvirt.ConnectURI
		Class backend.Class
	}
	cases := map[string]struct {
		reason string
		target Target
		want   want
	}{
		"System": {
			reason: "qemu:///system dials the default local socket.",
			target: Target{URI: "qemu:///system"},
			want:   want{Kind: "local " + DefaultSocket, URI: "qemu:///system"},
		},
		"SocketPath": {
			reason: "An explicit socket path wins over the URI's socket parameter.",
			target: Target{URI: "qemu+unix:///system?socket=/a", SocketPath: "/b"},
			want:   want{Kind: "local /b", URI: "qemu:///system"},
		},
		"SocketParam": {
			reason: "The URI's socket parameter is used.",
			target: Target{URI: "test+unix:///default?socket=/run/x"},
			want:   want{Kind: "local /run/x", URI: "test:///default"},
		},
		"LocalWithHost": {
			reason: "A unix transport cannot reach another host.",
			target: Target{URI: "qemu+unix://host/system"},
			want:   want{Class: backend.ClassPermanent},
		},
		"BadScheme": {
			reason: "Only the qemu and test drivers are supported.",
			target: Target{URI: "xen:///system"},
			want:   want{Class: backend.ClassPermanent},
		},
		"BadTransport": {
			reason: "The tcp transport is unauthenticated and refused.",
			target: Target{URI: "qemu+tcp://host/system"},
			want:   want{Class: backend.ClassPermanent},
		},
		"SSHNoCredentials": {
			reason: "SSH needs a key and known_hosts.",
			target: Target{URI: "qemu+ssh://root@host/system"},
			want:   want{Class: backend.ClassPermanent},
		},
		"SSHUnknownHost": {
			reason: "A host known_hosts does not list is refused before any dial.",
			target: Target{URI: "qemu+ssh://root@other.example/system", Credentials: sshCreds(ssh)},
			want:   want{Class: backend.ClassPermanent},
		},
		"SSH": {
			reason: "A known host with a key gives an SSH dialer to the default socket.",
			target: Target{URI: "qemu+ssh://admin@" + ssh.Addr + "/system", Credentials: sshCreds(ssh)},
			want:   want{Kind: "ssh admin@" + ssh.Addr + " " + DefaultSocket, URI: "qemu:///system"},
		},
		"TLSNoCredentials": {
			reason: "TLS needs a client certificate and a CA.",
			target: Target{URI: "qemu+tls://host/system"},
			want:   want{Class: backend.ClassPermanent},
		},
		"TLSImplicit": {
			reason: "Like libvirt, a host without a transport means TLS.",
			target: Target{URI: "qemu://host.example/system", Credentials: tlsCreds},
			want:   want{Kind: "tls host.example:16514", URI: "qemu:///system"},
		},
		"TLSBadKey": {
			reason: "A key that does not match the certificate is refused.",
			target: Target{URI: "qemu+tls://host/system", Credentials: Credentials{TLSCert: tlsCreds.TLSCert, TLSKey: []byte("x"), CACert: tlsCreds.CACert}},
			want:   want{Class: backend.ClassPermanent},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, uri, err := New(tc.target)
			got := want{URI: uri, Class: backend.ClassOf(err), Kind: describe(d)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nNew(...): -want, +got:\n%s\nerror: %v", tc.reason, diff, err)
			}
		})
	}
}

func describe(d any) string {
	switch d := d.(type) {
	case local:
		return "local " + d.path
	case *sshDialer:
		return fmt.Sprintf("ssh %s@%s %s", d.config.User, d.addr, d.socket)
	case *tlsDialer:
		return "tls " + d.addr
	}
	return ""
}

func TestCredentialsFromSecret(t *testing.T) {
	got := CredentialsFromSecret(map[string][]byte{
		"ssh-privatekey": []byte("k"), "known_hosts": []byte("h"),
		"tls.crt": []byte("c"), "tls.key": []byte("tk"), "ca.crt": []byte("ca"),
	})
	want := Credentials{SSHPrivateKey: []byte("k"), KnownHosts: []byte("h"), TLSCert: []byte("c"), TLSKey: []byte("tk"), CACert: []byte("ca")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CredentialsFromSecret: -want, +got:\n%s", diff)
	}
}

func TestLocalDial(t *testing.T) {
	sock := echoServer(t)
	d, _, err := New(Target{URI: "qemu:///system", SocketPath: sock})
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, d)
}

// echoServer serves an echo on a unix socket, standing in for libvirtd.
func echoServer(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(shortDir(t), "echo.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close() //nolint:errcheck // Test server.
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return sock
}

// shortDir is a temporary directory short enough for a unix socket path.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "dlr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// roundTrip dials and checks bytes come back through the connection.
func roundTrip(t *testing.T, d interface{ Dial() (net.Conn, error) }) {
	t.Helper()
	c, err := d.Dial()
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close() //nolint:errcheck // Test.
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("ReadFull: %q, %v", b, err)
	}
}

// TestNamespacedDialRefusesLoopbackName shows a name that resolves to a
// loopback address refused at dial time for a namespaced target: no check
// of the URI can know what a name resolves to. The listener is never
// reached, so the error tells nothing of which ports listen.
func TestNamespacedDialRefusesLoopbackName(t *testing.T) {
	for name, uri := range map[string]func(port string) string{
		"SSH": func(port string) string { return "qemu+ssh://root@localhost:" + port + "/system" },
		"TLS": func(port string) string { return "qemu+tls://localhost:" + port + "/system" },
	} {
		t.Run(name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			accepted := make(chan struct{}, 1)
			go func() {
				if c, err := l.Accept(); err == nil {
					accepted <- struct{}{}
					_ = c.Close()
				}
			}()
			_, port, _ := net.SplitHostPort(l.Addr().String())
			keys := dialertest.NewSSHServer(t, "")
			pki := dialertest.NewPKI(t)
			creds := sshCreds(keys)
			creds.KnownHosts = []byte(knownhosts.Line([]string{knownhosts.Normalize("localhost:" + port)}, keys.HostKey) + "\n")
			creds.TLSCert, creds.TLSKey, creds.CACert = pki.ClientCert, pki.ClientKey, pki.CACert
			target := Target{URI: uri(port), Credentials: creds, Namespaced: true}
			if err := CheckNamespaced(target); err != nil {
				t.Fatalf("CheckNamespaced(%s) = %v: a name passes the URI check", target.URI, err)
			}
			d, _, err := New(target)
			if err != nil {
				t.Fatal(err)
			}
			c, err := d.Dial()
			if err == nil {
				_ = c.Close()
			}
			if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), "a namespaced ProviderConfig may not reach 127.0.0.1:"+port) {
				t.Errorf("Dial(%s) = %v, want a Permanent refusal of the loopback address", target.URI, err)
			}
			select {
			case <-accepted:
				t.Error("the dial reached the loopback listener")
			case <-time.After(100 * time.Millisecond):
			}
		})
	}
}

func TestCheckNamespaced(t *testing.T) {
	cases := map[string]struct {
		reason string
		target Target
		want   backend.Class
	}{
		"System":        {"qemu:///system is the provider's own daemon.", Target{URI: "qemu:///system"}, backend.ClassPermanent},
		"UnixSocket":    {"A unix socket anywhere on the provider's machine.", Target{URI: "qemu+unix:///system?socket=/any/path"}, backend.ClassPermanent},
		"NoHostNoPlus":  {"qemu:// with no host is a local socket too.", Target{URI: "qemu://?socket=/any/path"}, backend.ClassPermanent},
		"TestDriver":    {"The test driver runs in the provider's daemon.", Target{URI: "test:///default"}, backend.ClassPermanent},
		"TestUnix":      {"test+unix is a local socket.", Target{URI: "test+unix:///default"}, backend.ClassPermanent},
		"SocketPath":    {"socketPath names a local socket, whatever the URI.", Target{URI: "qemu+ssh://u@h/system", SocketPath: "/run/libvirt/libvirt-sock"}, backend.ClassPermanent},
		"Unparsable":    {"A URI that does not parse is refused.", Target{URI: "qemu+ssh://h/%zz"}, backend.ClassPermanent},
		"SSH":           {"SSH to a host is what a team may use.", Target{URI: "qemu+ssh://u@h/system"}, backend.ClassNone},
		"SSHRemoteSock": {"A socket parameter over SSH names the remote host's socket.", Target{URI: "qemu+ssh://u@h/system?socket=/run/x"}, backend.ClassNone},
		"TLS":           {"TLS to a host is what a team may use.", Target{URI: "qemu+tls://h/system"}, backend.ClassNone},
		"ImplicitTLS":   {"A host without a transport is TLS.", Target{URI: "qemu://h/system"}, backend.ClassNone},
		"Loopback":      {"The provider's own pod is not a team's host.", Target{URI: "qemu+ssh://u@127.0.0.1:2222/system"}, backend.ClassPermanent},
		"LoopbackOther": {"All of 127.0.0.0/8 is loopback.", Target{URI: "qemu+tls://127.9.9.9/system"}, backend.ClassPermanent},
		"IPv6Loopback":  {"::1 is loopback.", Target{URI: "qemu+ssh://u@[::1]:22/system"}, backend.ClassPermanent},
		"Metadata":      {"169.254.0.0/16 holds the metadata server.", Target{URI: "qemu+ssh://u@169.254.169.254/system"}, backend.ClassPermanent},
		"IPv6LinkLocal": {"fe80::/10 is one hop away.", Target{URI: "qemu+tls://[fe80::1%25eth0]/system"}, backend.ClassPermanent},
		"Unspecified":   {"0.0.0.0 connects to this machine.", Target{URI: "qemu+ssh://u@0.0.0.0/system"}, backend.ClassPermanent},
		"Mapped":        {"An IPv4-mapped loopback is loopback.", Target{URI: "qemu+ssh://u@[::ffff:127.0.0.1]/system"}, backend.ClassPermanent},
		"Private":       {"A private address is a team's host like any other.", Target{URI: "qemu+ssh://u@10.1.2.3/system"}, backend.ClassNone},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := CheckNamespaced(tc.target)
			if got := backend.ClassOf(err); got != tc.want {
				t.Errorf("%s\nCheckNamespaced(%+v): want class %q, got %v", tc.reason, tc.target, tc.want, err)
			}
		})
	}
}
