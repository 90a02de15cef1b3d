/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package squid

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/bcrypt"
)

// counting returns a bcrypt comparison that counts its calls.
func counting(n *atomic.Int64) VerifierOption {
	return WithCompare(func(hash, password []byte) error {
		n.Add(1)
		return bcrypt.CompareHashAndPassword(hash, password)
	})
}

func TestVerifierComparisons(t *testing.T) {
	const user = "team-a"
	// Made outside the Verifiers under test, as a Secret written by an
	// earlier process would be: nothing about them is remembered yet.
	stored, err := newHtpasswd(user, "secret-a", bcrypt.DefaultCost)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		matches     []bool
		comparisons int64
	}
	cases := map[string]struct {
		reason    string
		opts      []VerifierOption
		passwords []string
		want      want
	}{
		"UnchangedOnce": {
			reason:    "An unchanged (hash, password) pair is compared once, however many Observes ask.",
			passwords: []string{"secret-a", "secret-a", "secret-a", "secret-a", "secret-a"},
			want:      want{matches: []bool{true, true, true, true, true}, comparisons: 1},
		},
		"RotationAtOnce": {
			reason:    "A rotated password is a new pair: the first Observe after the rotation compares it and sees the mismatch.",
			passwords: []string{"secret-a", "secret-a", "rotated", "rotated", "secret-a"},
			want:      want{matches: []bool{true, true, false, false, true}, comparisons: 2},
		},
		"NothingRemembered": {
			reason:    "With no room, every question costs a comparison, and the answers stay right.",
			opts:      []VerifierOption{WithMaxVerified(0)},
			passwords: []string{"secret-a", "rotated", "secret-a"},
			want:      want{matches: []bool{true, false, true}, comparisons: 3},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var n atomic.Int64
			v := NewVerifier(append([]VerifierOption{counting(&n)}, tc.opts...)...)
			got := want{}
			for _, p := range tc.passwords {
				got.matches = append(got.matches, v.HtpasswdMatches(stored, user, p))
			}
			got.comparisons = n.Load()
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nHtpasswdMatches(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestVerifierHtpasswdRemembers(t *testing.T) {
	var n atomic.Int64
	v := NewVerifier(counting(&n))
	file, err := v.Htpasswd("team-a", "secret-a")
	if err != nil {
		t.Fatal(err)
	}
	// The Observe right after a Create or rotation needs no comparison.
	if !v.HtpasswdMatches(file, "team-a", "secret-a") {
		t.Error("HtpasswdMatches(Htpasswd(u, p), u, p) = false")
	}
	if v.HtpasswdMatches(file, "team-a", "rotated") {
		t.Error("HtpasswdMatches(Htpasswd(u, p), u, rotated) = true")
	}
	if got := n.Load(); got != 1 {
		t.Errorf("comparisons = %d, want 1 (only the rotated password)", got)
	}
}

func TestVerifierBounded(t *testing.T) {
	// A fake comparison: the bound is about entries, not bcrypt.
	v := NewVerifier(WithMaxVerified(8), WithCompare(func(_, _ []byte) error { return nil }))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				// Distinct hashes of a cost the Verifier compares.
				v.HtpasswdMatches([]byte(fmt.Sprintf("u:$2y$04$%053d\n", g*1000+i)), "u", "p")
			}
		})
	}
	wg.Wait()
	if got := v.size(); got > 8 {
		t.Errorf("remembered %d answers, want at most 8", got)
	}
}

func TestVerifierOutsiderCost(t *testing.T) {
	const user, password = "team-a", "secret-a"
	above, err := newHtpasswd(user, password, MaxCost+1)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason string
		file   []byte
	}{
		"Cost31": {
			reason: "A hash at cost 31 (as a team can write into its Secret) takes days of CPU to compare: it is not compared.",
			file:   []byte(user + ":$2y$31$abcdefghijklmnopqrstuuKy1ot2y4BDhYMg8LWLmGkdMjtkBPNjW\n"),
		},
		"AboveProviderCost": {
			reason: "A hash of the right password above the cost the provider writes was not written by it: it does not match, uncompared.",
			file:   above,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var n atomic.Int64
			v := NewVerifier(counting(&n))
			done := make(chan bool, 1)
			go func() { done <- v.HtpasswdMatches(tc.file, user, password) }()
			select {
			case got := <-done:
				if got {
					t.Errorf("\n%s\nHtpasswdMatches(...) = true, want false", tc.reason)
				}
			case <-time.After(500 * time.Millisecond):
				// The comparison keeps a core busy until the test binary exits.
				t.Fatalf("\n%s\nHtpasswdMatches(...) still running after 500ms", tc.reason)
			}
			if got := n.Load(); got != 0 {
				t.Errorf("\n%s\ncomparisons = %d, want 0", tc.reason, got)
			}
		})
	}
}

// BenchmarkHtpasswdMatches shows the steady-state cost of checking an
// unchanged password, with and without remembered answers.
func BenchmarkHtpasswdMatches(b *testing.B) {
	file, err := newHtpasswd("team-a", "secret-a", bcrypt.DefaultCost)
	if err != nil {
		b.Fatal(err)
	}
	for name, v := range map[string]*Verifier{
		"Bcrypt":     NewVerifier(WithMaxVerified(0)),
		"Remembered": NewVerifier(),
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if !v.HtpasswdMatches(file, "team-a", "secret-a") {
					b.Fatal("HtpasswdMatches(...) = false")
				}
			}
		})
	}
}
