/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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
