/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package dialer

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // OpenSSH hashes known_hosts names with HMAC-SHA1.
	"encoding/base64"
	"net"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

const (
	errFmtHostKeyMismatch = "host key of %s is not the one known_hosts lists for it"
	errFmtHostKeyRevoked  = "host key of %s is marked @revoked in known_hosts"
	errFmtBadHashedHost   = "known_hosts line %d: malformed hashed host name"
)

// A knownHosts is a parsed known_hosts file, held in memory.
// x/crypto/ssh/knownhosts reads only files, and the provider's root file
// system may be read-only, so this parses the content with
// ssh.ParseKnownHosts and matches names itself, as OpenSSH does: plain and
// [host]:port names, hashed |1|salt|hash names, * and ? wildcards and !
// negations. @revoked keys are refused for every host; @cert-authority lines
// are ignored, because the dialer verifies host keys, not certificates.
type knownHosts struct {
	entries []knownHost
	revoked [][]byte
}

type knownHost struct {
	patterns []string
	key      ssh.PublicKey
}

// parseKnownHosts parses the content of a known_hosts file.
func parseKnownHosts(b []byte) (*knownHosts, error) {
	db := &knownHosts{}
	line := 0
	for len(bytes.TrimSpace(b)) > 0 {
		line++
		marker, hosts, key, _, rest, err := ssh.ParseKnownHosts(b)
		if err != nil {
			return nil, errors.Wrap(err, errParseKnownHosts)
		}
		b = rest
		switch marker {
		case "revoked":
			db.revoked = append(db.revoked, key.Marshal())
		case "cert-authority":
			continue
		default:
			for _, h := range hosts {
				if strings.HasPrefix(h, "|") {
					if _, _, err := decodeHash(h); err != nil {
						return nil, errors.Errorf(errFmtBadHashedHost, line)
					}
				}
			}
			db.entries = append(db.entries, knownHost{patterns: hosts, key: key})
		}
	}
	return db, nil
}

// keysFor returns the keys known_hosts lists for addr (host:port).
func (db *knownHosts) keysFor(addr string) []ssh.PublicKey {
	name := knownhosts.Normalize(addr)
	var keys []ssh.PublicKey
	for _, e := range db.entries {
		if matchHost(e.patterns, name) {
			keys = append(keys, e.key)
		}
	}
	return keys
}

// callback is an ssh.HostKeyCallback: the key must be one known_hosts lists
// for the address dialled, or, when it lists none for that name, for the
// address the connection reached. Its errors are knownhosts' own types, which
// the kvm backend classifies as permanent.
func (db *knownHosts) callback(hostname string, remote net.Addr, key ssh.PublicKey) error {
	host := knownhosts.Normalize(hostname)
	for _, r := range db.revoked {
		if bytes.Equal(r, key.Marshal()) {
			return errors.Wrapf(&knownhosts.RevokedError{Revoked: knownhosts.KnownKey{Key: key}}, errFmtHostKeyRevoked, host)
		}
	}
	want := db.keysFor(hostname)
	if len(want) == 0 && remote != nil {
		want = db.keysFor(remote.String())
	}
	if len(want) == 0 {
		// An empty Want is knownhosts' "key is unknown".
		return errors.Wrapf(&knownhosts.KeyError{}, errFmtUnknownHost, host)
	}
	ke := &knownhosts.KeyError{}
	for _, k := range want {
		if bytes.Equal(k.Marshal(), key.Marshal()) {
			return nil
		}
		ke.Want = append(ke.Want, knownhosts.KnownKey{Key: k})
	}
	return errors.Wrapf(ke, errFmtHostKeyMismatch, host)
}

// matchHost reports whether a known_hosts line's host patterns match name
// (normalized: host, or [host]:port when the port is not 22). A negated
// pattern that matches excludes the line whatever else matches.
func matchHost(patterns []string, name string) bool {
	matched := false
	for _, p := range patterns {
		negate := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		var m bool
		if strings.HasPrefix(p, "|") {
			m = matchHashed(p, name)
		} else {
			m = wildcard(strings.ToLower(p), strings.ToLower(name))
		}
		if m && negate {
			return false
		}
		matched = matched || m
	}
	return matched
}

// decodeHash splits a hashed name, |1|base64(salt)|base64(hmac).
func decodeHash(p string) (salt, hash []byte, err error) {
	parts := strings.Split(p, "|")
	if len(parts) != 4 || parts[0] != "" || parts[1] != "1" {
		return nil, nil, errors.New(p)
	}
	if salt, err = base64.StdEncoding.DecodeString(parts[2]); err != nil {
		return nil, nil, err
	}
	if hash, err = base64.StdEncoding.DecodeString(parts[3]); err != nil {
		return nil, nil, err
	}
	return salt, hash, nil
}

func matchHashed(p, name string) bool {
	salt, hash, err := decodeHash(p)
	if err != nil {
		return false
	}
	mac := hmac.New(sha1.New, salt)
	_, _ = mac.Write([]byte(name))
	return hmac.Equal(mac.Sum(nil), hash)
}

// wildcard matches s against an OpenSSH pattern: * matches any run of
// characters, ? any one. It backtracks only to the last *, so it takes
// O(len(p)*len(s)) whatever the pattern: known_hosts may come from a
// namespaced ProviderConfig's Secret, which an app team writes.
func wildcard(p, s string) bool {
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
