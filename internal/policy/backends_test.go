/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

type someParams struct{ N int }

func TestParamsOf(t *testing.T) {
	type want struct {
		p   someParams
		err bool
	}
	cases := map[string]struct {
		reason      string
		forProvider any
		want        want
	}{
		"Value":   {reason: "The connector hands parameters as a value.", forProvider: someParams{N: 1}, want: want{p: someParams{N: 1}}},
		"Pointer": {reason: "The function hands them as a pointer.", forProvider: &someParams{N: 2}, want: want{p: someParams{N: 2}}},
		"Nil":     {reason: "A nil pointer is no parameters.", forProvider: (*someParams)(nil), want: want{err: true}},
		"Other":   {reason: "Another backend's parameters are an error.", forProvider: struct{ M int }{}, want: want{err: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := ParamsOf[someParams](nil, tc.forProvider)
			if diff := cmp.Diff(tc.want, want{p: p, err: err != nil}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nParamsOf(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
