/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package apiwarning

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

func TestLogger(t *testing.T) {
	finalizer := `metadata.finalizers: "finalizer.managedresource.crossplane.io": prefer a domain-qualified finalizer name`
	long := "x" + strings.Repeat("é", maxLen) // maxLen falls within a rune
	type warning struct {
		code    int
		message string
	}
	many := make([]warning, 0, remember+1)
	for i := range remember + 1 {
		many = append(many, warning{299, fmt.Sprintf("warning %d", i)})
	}
	cases := map[string]struct {
		reason   string
		warnings []warning
		want     []string
	}{
		"Once": {
			reason:   "The same warning on every write of a managed resource is logged once.",
			warnings: []warning{{299, finalizer}, {299, finalizer}, {299, finalizer}},
			want:     []string{finalizer},
		},
		"Distinct": {
			reason:   "Each distinct warning is logged.",
			warnings: []warning{{299, "a"}, {299, "b"}, {299, "a"}},
			want:     []string{"a", "b"},
		},
		"NotAWarning": {
			reason:   "Only code 299 is a warning; an empty one says nothing.",
			warnings: []warning{{199, "misc"}, {299, ""}},
		},
		"Long": {
			reason:   "A long warning is cut at a rune's start, and remembered as cut.",
			warnings: []warning{{299, long}, {299, long}},
			want:     []string{long[:maxLen-1] + "..."},
		},
		"Forgets": {
			reason:   "Once full it forgets what it logged: a server that sends a new warning with every response costs lines, not memory.",
			warnings: append(many, warning{299, "warning 0"}),
			want: func() []string {
				w := make([]string, 0, len(many)+1)
				for _, m := range many {
					w = append(w, m.message)
				}
				return append(w, "warning 0")
			}(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			lg := funcr.New(func(_, args string) {
				got = append(got, args)
			}, funcr.Options{})
			ctx := log.IntoContext(t.Context(), lg)
			l := NewLogger("config", "ProviderConfig team/default")
			for _, w := range tc.warnings {
				l.HandleWarningHeaderWithContext(ctx, w.code, "", w.message)
			}
			var want []string
			for _, m := range tc.want {
				want = append(want, fmt.Sprintf(`"level"=0 "msg"="Warning from the API server" "warning"=%q "config"="ProviderConfig team/default"`, m))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nlogged: -want, +got:\n%s", tc.reason, diff)
			}
			if len(l.seen) > remember {
				t.Errorf("%s\nremembers %d warnings, want at most %d", tc.reason, len(l.seen), remember)
			}
		})
	}
}
