/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package backend

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFnsNilPanics(t *testing.T) {
	f := Fns[struct{}, struct{}]{}
	ctx := context.Background()
	cases := map[string]struct {
		reason string
		call   func()
		want   string
	}{
		"Observe": {reason: "An unexpected Observe must fail loudly.", call: func() { _, _ = f.Observe(ctx, Desired[struct{}]{}) }, want: "backend.Fns: Observe was called but ObserveFn is nil"},
		"Create":  {reason: "An unexpected Create must fail loudly.", call: func() { _ = f.Create(ctx, Desired[struct{}]{}) }, want: "backend.Fns: Create was called but CreateFn is nil"},
		"Update":  {reason: "An unexpected Update must fail loudly.", call: func() { _ = f.Update(ctx, Desired[struct{}]{}) }, want: "backend.Fns: Update was called but UpdateFn is nil"},
		"Delete":  {reason: "An unexpected Delete must fail loudly.", call: func() { _ = f.Delete(ctx, Desired[struct{}]{}) }, want: "backend.Fns: Delete was called but DeleteFn is nil"},
		"List":    {reason: "An unexpected List must fail loudly.", call: func() { _, _ = f.List(ctx) }, want: "backend.Fns: List was called but ListFn is nil"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := func() (msg string) {
				defer func() { msg = fmt.Sprint(recover()) }()
				tc.call()
				return ""
			}()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\npanic: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
