/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// closer counts its Close calls, as a backend with informers stops them.
type closer struct{ closed int }

func (c *closer) Close() error { c.closed++; return nil }

// TestClientCacheCloses shows that a backend replaced by a rebuild (a
// changed provider config) or forgotten is closed, so the informers of a
// watching backend stop with it; the backend in use is not.
func TestClientCacheCloses(t *testing.T) {
	cases := map[string]struct {
		reason string
		then   func(c *ClientCache[*closer], build func() (*closer, error))
		want   []int
	}{
		"SameVersion": {
			reason: "The backend of an unchanged config is reused, not closed.",
			then: func(c *ClientCache[*closer], build func() (*closer, error)) {
				_, _ = c.Get("pc", "1/", build)
			},
			want: []int{0},
		},
		"Rebuilt": {
			reason: "A new version closes the old backend once; the new one stays open.",
			then: func(c *ClientCache[*closer], build func() (*closer, error)) {
				_, _ = c.Get("pc", "2/", build)
			},
			want: []int{1, 0},
		},
		"Forgotten": {
			reason: "Forget closes the backend.",
			then:   func(c *ClientCache[*closer], _ func() (*closer, error)) { c.Forget("pc") },
			want:   []int{1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var built []*closer
			c := NewClientCache[*closer]()
			build := func() (*closer, error) { b := &closer{}; built = append(built, b); return b, nil }
			if _, err := c.Get("pc", "1/", build); err != nil {
				t.Fatal(err)
			}
			tc.then(c, build)
			got := []int{}
			for _, b := range built {
				got = append(got, b.closed)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nClose calls per built backend: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
