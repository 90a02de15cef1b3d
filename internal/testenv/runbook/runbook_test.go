/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package runbook

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	cases := map[string]struct {
		md      string
		want    []Step
		wantErr string
	}{
		"StepsInOrder": {
			md: "# Title\n\n<!-- step: one -->\n```sh\necho 1\n```\n\n```yaml\nkind: X\n```\n\n<!-- step: two -->\n```sh\necho 2\necho 3\n```\n",
			want: []Step{
				{Name: "one", Line: 4, Script: "echo 1\n"},
				{Name: "two", Line: 13, Script: "echo 2\necho 3\n"},
			},
		},
		"ShInsideAnotherFenceIsNoStep": {
			md:   "````markdown\n```sh\necho no\n```\n````\n",
			want: nil,
		},
		"IndentedBlock": {
			md:   "- a list item:\n\n  <!-- step: in-list -->\n  ```sh\n  echo 1\n  ```\n",
			want: []Step{{Name: "in-list", Line: 4, Script: "  echo 1\n"}},
		},
		"Unnamed":   {md: "```sh\necho 1\n```\n", wantErr: "line 1: a sh block without"},
		"Duplicate": {md: "<!-- step: a -->\n```sh\n```\n<!-- step: a -->\n```sh\n```\n", wantErr: `line 4: step "a" is named twice`},
		"Stray":     {md: "<!-- step: a -->\ntext\n", wantErr: `line 1: step "a" names no sh block`},
		"Unclosed":  {md: "<!-- step: a -->\n```sh\necho\n", wantErr: `line 2: the block of step "a" is not closed`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Parse([]byte(tc.md))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse(...): want error %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse(...): -want, +got:\n%s", diff)
			}
		})
	}
}

func TestNamed(t *testing.T) {
	md := "```sh\necho unnamed\n```\n<!-- step: b -->\n```sh\necho b\n```\n"
	got, err := Named([]byte(md))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Step{{Name: "b", Line: 5, Script: "echo b\n"}}, got); diff != "" {
		t.Errorf("Named(...): -want, +got:\n%s", diff)
	}
}

func TestVariables(t *testing.T) {
	s := Step{Name: "vars", Line: 10, Script: "# what differs\nexport A=a.example   # the registry\nexport B_2=$A/x\n\n"}
	names, vals, err := Variables(s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"A", "B_2"}, names); diff != "" {
		t.Errorf("names: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"A": "a.example", "B_2": "$A/x"}, vals); diff != "" {
		t.Errorf("values: -want, +got:\n%s", diff)
	}
	if _, _, err := Variables(Step{Name: "vars", Line: 10, Script: "export A=1\nA=2\n"}); err == nil || !strings.Contains(err.Error(), "line 12") {
		t.Errorf("a line that is no export: want an error naming line 12, got %v", err)
	}
}
