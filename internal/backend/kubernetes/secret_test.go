/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

func TestUpdateKeepsSecret(t *testing.T) {
	type secret struct {
		ResourceVersion string
		Htpasswd        string
	}
	get := func(t *testing.T, b *Backend) secret {
		t.Helper()
		s := &corev1.Secret{}
		if err := b.kube.Get(t.Context(), key(), s); err != nil {
			t.Fatal(err)
		}
		return secret{ResourceVersion: s.ResourceVersion, Htpasswd: string(s.Data[keyHtpasswd])}
	}
	cases := map[string]struct {
		reason string
		update []desiredMod
	}{
		"NothingChanged": {
			reason: "An Update with nothing changed writes no Secret.",
		},
		"AllowlistChanged": {
			reason: "An Update for another part keeps the htpasswd, its salt and so the Secret.",
			update: []desiredMod{withDestinations(".example.org")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := New(created(t, desired()))
			before := get(t, b)
			if err := b.Update(t.Context(), desired(tc.update...)); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, get(t, b)); diff != "" {
				t.Errorf("\n%s\nSecret: -before, +after:\n%s", tc.reason, diff)
			}
		})
	}
}

// BenchmarkObserve shows what a steady-state poll costs against a fake
// cluster: with the password unchanged its bcrypt answer is remembered;
// with a password Observe has not seen before (a rotation, or every poll
// before answers were remembered) it pays one bcrypt comparison.
func BenchmarkObserve(b *testing.B) {
	s, err := NewScheme()
	if err != nil {
		b.Fatal(err)
	}
	d := desired()
	be := New(fake.NewClientBuilder().WithScheme(s).Build())
	if err := be.Create(b.Context(), d); err != nil {
		b.Fatal(err)
	}
	b.Run("Unchanged", func(b *testing.B) {
		for b.Loop() {
			o, err := be.Observe(b.Context(), d)
			if err != nil || !o.UpToDate {
				b.Fatalf("Observe: up to date %t, %v", o.UpToDate, err)
			}
		}
	})
	b.Run("NewPassword", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if _, err := be.Observe(b.Context(), desired(withPassword("rotated-"+strconv.Itoa(i)))); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestObserveBcrypt shows the backend's own Verifier at work: a steady-state
// Observe costs no bcrypt comparison, a rotated password is compared (and
// found stale) at the next Observe, and one backend's memory is not
// another's.
func TestObserveBcrypt(t *testing.T) {
	type want struct {
		Comparisons int
		UpToDate    bool
	}
	cases := map[string]struct {
		reason  string
		observe []desiredMod
		polls   int
		fresh   bool
		want    want
	}{
		"Unchanged": {
			reason: "Create remembers the file it wrote: ten polls compare nothing.",
			polls:  10,
			want:   want{Comparisons: 0, UpToDate: true},
		},
		"Rotated": {
			reason:  "A rotated password is a new pair: compared once, at the first poll, and remembered.",
			observe: []desiredMod{withPassword("rotated")},
			polls:   10,
			want:    want{Comparisons: 1, UpToDate: false},
		},
		"OtherBackend": {
			reason: "A backend built anew (a changed provider config) remembers nothing: one comparison.",
			polls:  10,
			fresh:  true,
			want:   want{Comparisons: 1, UpToDate: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got want
			count := func(hash, password []byte) error {
				got.Comparisons++
				return bcrypt.CompareHashAndPassword(hash, password)
			}
			c := fakeCluster(t)
			b := New(c, WithVerifier(squid.NewVerifier(squid.WithCompare(count))))
			if err := b.Create(t.Context(), desired()); err != nil {
				t.Fatal(err)
			}
			if tc.fresh {
				b = New(c, WithVerifier(squid.NewVerifier(squid.WithCompare(count))))
			}
			for range tc.polls {
				o, err := b.Observe(t.Context(), desired(tc.observe...))
				if err != nil {
					t.Fatal(err)
				}
				got.UpToDate = o.UpToDate
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
