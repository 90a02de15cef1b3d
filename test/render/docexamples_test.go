/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package render_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// shownExample matches a YAML block of the docs that shows an example
// file: its first line is a comment naming the file.
var shownExample = regexp.MustCompile("(?m)^( *)```yaml\n *# (examples/[A-Za-z0-9/._-]+\\.yaml)\n((?:.*\n)*?) *```")

// TestDocsShowExamplesAsTheyAre: a YAML block of the docs whose first line
// is "# examples/..." holds the same objects as that file, which
// TestValidate checks against the schemas: the copy a reader pastes cannot
// drift from the validated one.
func TestDocsShowExamplesAsTheyAre(t *testing.T) {
	docs, _ := filepath.Glob(repoPath("docs", "*.md"))
	shown := 0
	for _, f := range docs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range shownExample.FindAllStringSubmatch(string(b), -1) {
			shown++
			block := strings.ReplaceAll("\n"+m[3], "\n"+m[1], "\n")
			want := readDocs(t, repoPath(strings.Split(m[2], "/")...))
			if diff := cmp.Diff(want, splitDocs(t, block)); diff != "" {
				t.Errorf("%s shows %s with other objects than the file's: -file, +docs:\n%s", filepath.Base(f), m[2], diff)
			}
		}
	}
	if shown == 0 {
		t.Fatal(`no YAML block of the docs starts with "# examples/...": is the regexp still right?`)
	}
}
