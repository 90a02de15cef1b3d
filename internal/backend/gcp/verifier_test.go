/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/bcrypt"

	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// TestVerifier shows that the backend checks the htpasswd in the metadata
// with its own Verifier: no bcrypt comparison per Observe of an unchanged
// password, one after a restart, and a rotation noticed at once.
func TestVerifier(t *testing.T) {
	type want struct {
		UpToDate    []bool
		Comparisons int64
	}
	cases := map[string]struct {
		reason string
		// restart observes with a new Backend (a new provider process).
		restart   bool
		passwords []string
		want      want
	}{
		"Unchanged": {
			reason:    "The backend that created the instance remembers its htpasswd: no comparison.",
			passwords: []string{"s3cret", "s3cret", "s3cret"},
			want:      want{UpToDate: []bool{true, true, true}, Comparisons: 0},
		},
		"Restarted": {
			reason:    "A new backend compares the stored htpasswd once, then remembers.",
			restart:   true,
			passwords: []string{"s3cret", "s3cret", "s3cret"},
			want:      want{UpToDate: []bool{true, true, true}, Comparisons: 1},
		},
		"Rotated": {
			reason:    "A rotated password is compared at the first Observe after the rotation, and differs.",
			passwords: []string{"s3cret", "rotated", "rotated"},
			want:      want{UpToDate: []bool{true, false, false}, Comparisons: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var n atomic.Int64
			v := squid.NewVerifier(squid.WithCompare(func(hash, password []byte) error {
				n.Add(1)
				return bcrypt.CompareHashAndPassword(hash, password)
			}))
			e := newEnv(t)
			b, err := New(t.Context(), testProject, e.fake.ClientOptions(), WithCallTimeout(10*time.Second), WithClock(e.clock.now), WithVerifier(v))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			creator := b
			if tc.restart {
				creator = e.b
			}
			if err := creator.Create(ctx(t), desired()); err != nil {
				t.Fatal(err)
			}
			e.b = creator
			e.untilReady(t, desired(), 8)
			n.Store(0)
			got := want{}
			for _, p := range tc.passwords {
				d := desired()
				d.Credentials.Password = p
				o, err := b.Observe(ctx(t), d)
				if err != nil {
					t.Fatal(err)
				}
				got.UpToDate = append(got.UpToDate, o.UpToDate)
			}
			got.Comparisons = n.Load()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
