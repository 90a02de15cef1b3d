/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package dialer

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func newKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKnownHosts(t *testing.T) {
	host, other := newKey(t), newKey(t)
	line := func(names []string, k ssh.PublicKey) string { return knownhosts.Line(names, k) + "\n" }
	remote := &net.TCPAddr{IP: net.ParseIP("192.0.2.10"), Port: 2222}
	type want struct {
		ok      bool
		errKind string // "unknown", "mismatch" or "revoked"
	}
	cases := map[string]struct {
		reason     string
		knownHosts string
		addr       string
		key        ssh.PublicKey
		want       want
	}{
		"Plain": {
			reason:     "A plain name on port 22 matches the bare host.",
			knownHosts: line([]string{"kvm.example.com"}, host),
			addr:       "kvm.example.com:22",
			key:        host,
			want:       want{ok: true},
		},
		"PlainCaseInsensitive": {
			reason:     "Host names compare without case, as OpenSSH compares them.",
			knownHosts: line([]string{"KVM.example.com"}, host),
			addr:       "kvm.example.com:22",
			key:        host,
			want:       want{ok: true},
		},
		"BracketedPort": {
			reason:     "A non-22 port is [host]:port.",
			knownHosts: line([]string{"[kvm.example.com]:2222"}, host),
			addr:       "kvm.example.com:2222",
			key:        host,
			want:       want{ok: true},
		},
		"BareHostOtherPort": {
			reason:     "A bare name does not match the host on another port.",
			knownHosts: line([]string{"kvm.example.com"}, host),
			addr:       "kvm.example.com:2222",
			key:        host,
			want:       want{errKind: "unknown"},
		},
		"Hashed": {
			reason:     "A hashed |1|salt|hash name matches the name it hashes.",
			knownHosts: line([]string{knownhosts.HashHostname(knownhosts.Normalize("kvm.example.com:2222"))}, host),
			addr:       "kvm.example.com:2222",
			key:        host,
			want:       want{ok: true},
		},
		"HashedOtherHost": {
			reason:     "A hashed name does not match another name.",
			knownHosts: line([]string{knownhosts.HashHostname("other.example.com")}, host),
			addr:       "kvm.example.com:22",
			key:        host,
			want:       want{errKind: "unknown"},
		},
		"Wildcard": {
			reason:     "* matches any run of characters.",
			knownHosts: line([]string{"*.example.com"}, host),
			addr:       "kvm.example.com:22",
			key:        host,
			want:       want{ok: true},
		},
		"Negated": {
			reason:     "A matching !pattern excludes the line.",
			knownHosts: line([]string{"*.example.com", "!kvm.example.com"}, host),
			addr:       "kvm.example.com:22",
			key:        host,
			want:       want{errKind: "unknown"},
		},
		"RemoteAddress": {
			reason:     "With no line for the name, the address reached is looked up.",
			knownHosts: line([]string{"[192.0.2.10]:2222"}, host),
			addr:       "kvm.example.com:2222",
			key:        host,
			want:       want{ok: true},
		},
		"Mismatch": {
			reason:     "A listed host presenting another key is refused.",
			knownHosts: line([]string{"kvm.example.com"}, other),
			addr:       "kvm.example.com:22",
			key:        host,
			want:       want{errKind: "mismatch"},
		},
		"OneOfSeveral": {
			reason:     "Any key listed for the host is accepted.",
			knownHosts: line([]string{"kvm.example.com"}, other) + "# a comment\n\n" + line([]string{"kvm.example.com"}, host),
			addr:       "kvm.example.com:22",
			key:        host,
			want:       want{ok: true},
		},
		"Revoked": {
			reason:     "A @revoked key is refused even where it is also listed.",
			knownHosts: line([]string{"kvm.example.com"}, host) + "@revoked * " + string(ssh.MarshalAuthorizedKey(host)),
			addr:       "kvm.example.com:22",
			key:        host,
			want:       want{errKind: "revoked"},
		},
		"CertAuthorityIgnored": {
			reason:     "A @cert-authority line is no host key: the dialer does not take certificates.",
			knownHosts: "@cert-authority *.example.com " + string(ssh.MarshalAuthorizedKey(host)),
			addr:       "kvm.example.com:22",
			key:        host,
			want:       want{errKind: "unknown"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			db, err := parseKnownHosts([]byte(tc.knownHosts))
			if err != nil {
				t.Fatalf("\n%s\nparseKnownHosts: %v", tc.reason, err)
			}
			err = db.callback(tc.addr, remote, tc.key)
			if tc.want.ok {
				if err != nil {
					t.Errorf("\n%s\ncallback(%s): %v, want nil", tc.reason, tc.addr, err)
				}
				return
			}
			var ke *knownhosts.KeyError
			var re *knownhosts.RevokedError
			got := "accepted"
			switch {
			case errors.As(err, &re):
				got = "revoked"
			case errors.As(err, &ke) && len(ke.Want) == 0:
				got = "unknown"
			case errors.As(err, &ke):
				got = "mismatch"
			}
			if got != tc.want.errKind {
				t.Errorf("\n%s\ncallback(%s): got %s (%v), want %s", tc.reason, tc.addr, got, err, tc.want.errKind)
			}
		})
	}
}

func TestParseKnownHostsRefusesGarbage(t *testing.T) {
	for name, in := range map[string]string{
		"NoKey":      "kvm.example.com\n",
		"BadHash":    "|1|notbase64!|x ssh-ed25519 AAAA\n",
		"BadKeyData": "kvm.example.com ssh-ed25519 AAAA\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := parseKnownHosts([]byte(in)); err == nil {
				t.Errorf("parseKnownHosts(%q): want an error", in)
			}
		})
	}
}

// TestWildcardLinear checks a pattern made to backtrack stays fast: an app
// team's namespaced ProviderConfig may supply known_hosts.
func TestWildcardLinear(t *testing.T) {
	p := strings.Repeat("*a", 40) + "b"
	s := strings.Repeat("a", 250)
	if wildcard(p, s) {
		t.Errorf("wildcard(%q, %q) = true", p, s)
	}
}

// TestSSHDialerNeedsNoTempDir checks the SSH dialer is built with no
// writable TMPDIR: the provider may run with a read-only root file system.
func TestSSHDialerNeedsNoTempDir(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "absent"))
	if _, err := os.CreateTemp("", "x"); err == nil {
		t.Fatal("TMPDIR is still writable; the test proves nothing")
	}
	k := newKey(t)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	pemKey, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	creds := Credentials{
		SSHPrivateKey: pem.EncodeToMemory(pemKey),
		KnownHosts:    []byte(knownhosts.Line([]string{"[kvm.example.com]:2222"}, k) + "\n"),
	}
	if _, _, err := New(Target{URI: "qemu+ssh://root@kvm.example.com:2222/system", Credentials: creds}); err != nil {
		t.Errorf("New: %v", err)
	}
}
