/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"hash"
	"io"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// DefaultMaxVerified bounds the answers a Verifier remembers: one per proxy
// (plus a rotation in flight) at a few thousand proxies, ~100 KiB.
const DefaultMaxVerified = 4096

// MaxCost is the highest bcrypt cost a Verifier compares: the highest the
// provider writes (backend.HtpasswdCost). A file it did not write, at a
// cost someone else chose, is not compared: each step of cost doubles the
// work, and at 31 one comparison takes days of CPU that cannot be
// interrupted. Such a file only "does not accept the credentials", so the
// provider writes its own in its place. At this cost a comparison takes
// ~60 ms, which bounds every one of them.
const MaxCost = bcrypt.DefaultCost

// A Verifier checks htpasswd files against passwords and remembers its
// answers, so that an unchanged (hash, password) pair costs one bcrypt
// comparison per process instead of one per Observe (~60 ms at cost 10). A
// rotated password makes a new pair, which is compared at once. Answers are
// keyed by an HMAC of the pair under a per-Verifier random key: the password
// is never stored, and the key cannot be tested offline. A Verifier is safe
// for concurrent use.
type Verifier struct {
	compare func(hash, password []byte) error
	max     int
	key     []byte

	// macs holds HMACs under key, reset for each sum: a new one for
	// every Observe was garbage a steady poll need not make.
	macs sync.Pool

	mu   sync.Mutex
	seen map[[sha256.Size]byte]bool
}

// A VerifierOption configures a Verifier.
type VerifierOption func(*Verifier)

// WithCompare replaces bcrypt.CompareHashAndPassword, e.g. to count calls.
func WithCompare(fn func(hash, password []byte) error) VerifierOption {
	return func(v *Verifier) { v.compare = fn }
}

// WithMaxVerified bounds the remembered answers; 0 remembers none.
func WithMaxVerified(n int) VerifierOption {
	return func(v *Verifier) { v.max = n }
}

// NewVerifier returns a Verifier that remembers up to DefaultMaxVerified
// answers.
func NewVerifier(o ...VerifierOption) *Verifier {
	v := &Verifier{
		compare: bcrypt.CompareHashAndPassword,
		max:     DefaultMaxVerified,
		key:     make([]byte, sha256.Size),
		seen:    map[[sha256.Size]byte]bool{},
	}
	// crypto/rand.Read never fails since Go 1.24.
	_, _ = rand.Read(v.key)
	v.macs.New = func() any { return hmac.New(sha256.New, v.key) }
	for _, fn := range o {
		fn(v)
	}
	return v
}

// uncached serves the package functions HtpasswdMatches and Htpasswd. It
// remembers nothing: a process-wide memory would outlive the provider
// configs it served, so every backend owns its Verifier instead.
var uncached = NewVerifier(WithMaxVerified(0))

// Htpasswd is Htpasswd that also remembers the new file accepts password, so
// the Observe after a Create or rotation needs no bcrypt comparison either.
func (v *Verifier) Htpasswd(user, password string) ([]byte, error) {
	return v.HtpasswdCost(user, password, bcrypt.DefaultCost)
}

// HtpasswdCost is Htpasswd with a bcrypt cost of the caller's choice
// (bcrypt.MinCost to bcrypt.MaxCost): the work factor only protects a
// guessable password, so the caller decides, knowing where it came from.
func (v *Verifier) HtpasswdCost(user, password string, cost int) ([]byte, error) {
	file, err := newHtpasswd(user, password, cost)
	if err != nil {
		return nil, err
	}
	hash := strings.TrimSuffix(strings.TrimPrefix(string(file), user+":"), "\n")
	v.remember(v.sum(hash, password), true)
	return file, nil
}

// HtpasswdMatches is HtpasswdMatches with remembered answers.
func (v *Verifier) HtpasswdMatches(file []byte, user, password string) bool {
	if checkUser(user) != nil || password == "" {
		return false
	}
	// Lines are read in place: a Scanner's buffer was most of what a
	// steady Observe allocated to compare the Secret.
	for line := range bytes.Lines(file) {
		u, hash, ok := bytes.Cut(bytes.TrimSpace(line), []byte(":"))
		if !ok || string(u) != user {
			continue
		}
		return v.matches(string(hash), password)
	}
	return false
}

func (v *Verifier) matches(hash, password string) bool {
	k := v.sum(hash, password)
	v.mu.Lock()
	ok, known := v.seen[k]
	v.mu.Unlock()
	if known {
		return ok
	}
	// bcrypt.Cost only parses the hash's prefix.
	if cost, err := bcrypt.Cost([]byte(hash)); err != nil || cost > MaxCost {
		return false
	}
	// Compare unlocked: two proxies must not wait on each other's bcrypt.
	// A comparison is deterministic, so a mismatch is remembered too.
	ok = v.compare([]byte(hash), []byte(password)) == nil
	v.remember(k, ok)
	return ok
}

func (v *Verifier) sum(hashed, password string) [sha256.Size]byte {
	m := v.macs.Get().(hash.Hash)
	defer v.macs.Put(m)
	m.Reset()
	_, _ = io.WriteString(m, hashed)
	_, _ = m.Write([]byte{0})
	_, _ = io.WriteString(m, password)
	var k [sha256.Size]byte
	m.Sum(k[:0])
	return k
}

func (v *Verifier) remember(k [sha256.Size]byte, ok bool) {
	if v.max <= 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, known := v.seen[k]; !known && len(v.seen) >= v.max {
		// Drop an arbitrary entry (map order is random): a dropped pair
		// only costs one more comparison.
		for old := range v.seen {
			delete(v.seen, old)
			break
		}
	}
	v.seen[k] = ok
}

func (v *Verifier) size() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.seen)
}
