/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package render_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/runbook"
)

// The steps of docs/getting-started.md, in order (test/e2e/docs_test.go
// runs them against the suite's cluster and says there which it cannot).
var gettingStartedSteps = []string{
	"variables", "build", "crossplane-ca", "crossplane-helm", "node-trust", "rbac", "configuration",
	"proxy-namespace", "gcp-credentials", "kvm-credentials", "provider-configs",
	"claim", "rotate", "connection-secret", "use", "namespaced-configuration", "namespaced-get",
}

// TestGettingStartedSteps checks, without a cluster, the commands
// docs/getting-started.md gives: every sh block is a named step, the steps
// are the expected ones and valid bash, every file of the repository they
// name exists, every object they name by name is one the repository or the
// page makes, and what the steps the e2e cannot run say agrees with what
// the suite installs instead (Crossplane's version, the CA ConfigMap of the
// values file).
func TestGettingStartedSteps(t *testing.T) {
	b, err := os.ReadFile(repoPath("docs", "getting-started.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := runbook.Parse(b)
	if err != nil {
		t.Fatalf("docs/getting-started.md: %v", err)
	}
	var names []string
	script := map[string]string{}
	for _, s := range steps {
		names = append(names, s.Name)
		script[s.Name] = s.Script
	}
	if strings.Join(names, " ") != strings.Join(gettingStartedSteps, " ") {
		t.Errorf("steps of docs/getting-started.md:\n got %v\nwant %v", names, gettingStartedSteps)
	}

	// Each step is valid bash.
	for _, s := range steps {
		cmd := exec.Command("bash", "-n")
		cmd.Stdin = strings.NewReader(s.Script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("step %s (line %d) is no valid bash: %v\n%s", s.Name, s.Line, err, out)
		}
	}

	// Files of the repository: examples/..., package/...
	file := regexp.MustCompile(`(?:^|[\s=])((?:examples|package)/[A-Za-z0-9_./-]+)`)
	for _, s := range steps {
		for _, m := range file.FindAllStringSubmatch(s.Script, -1) {
			if _, err := os.Stat(repoPath(strings.TrimSuffix(m[1], "."))); err != nil {
				t.Errorf("step %s (line %d) names %s, which does not exist", s.Name, s.Line, m[1])
			}
		}
	}

	// Objects named in kubectl get, wait and annotate: made by a file of
	// package/ or examples/, or by the page itself.
	known := objectNames(t)
	for _, m := range regexp.MustCompile(`(?m)^\s*name: ([a-z0-9.:-]+)`).FindAllStringSubmatch(string(b), -1) {
		known[m[1]] = true
	}
	named := regexp.MustCompile(`kubectl (?:get|wait|annotate) ([a-z.]+) ([a-z0-9][a-z0-9.-]*)`)
	for _, s := range steps {
		for _, m := range named.FindAllStringSubmatch(s.Script, -1) {
			if !known[m[2]] {
				t.Errorf("step %s (line %d): %q names %s %s, which neither the repository nor the page makes", s.Name, s.Line, m[0], m[1], m[2])
			}
		}
	}

	// The Crossplane the page installs is the one the suite runs.
	tools, err := os.ReadFile(repoPath("hack", "tools.sh"))
	if err != nil {
		t.Fatal(err)
	}
	core := regexp.MustCompile(`(?m)^CROSSPLANE_CORE_VERSION=v(\S+)`).FindSubmatch(tools)
	if core == nil {
		t.Fatal("hack/tools.sh sets no CROSSPLANE_CORE_VERSION")
	}
	if want := "--version " + string(core[1]); !strings.Contains(script["crossplane-helm"], want) {
		t.Errorf("step crossplane-helm installs another Crossplane than the suite's (%s):\n%s", want, script["crossplane-helm"])
	}
	if !strings.Contains(script["crossplane-helm"], "-f examples/crossplane/values.yaml") {
		t.Errorf("step crossplane-helm does not install with examples/crossplane/values.yaml, the suite's values:\n%s", script["crossplane-helm"])
	}
	// The CA ConfigMap is the one the values file names.
	vals := readDocs(t, repoPath("examples", "crossplane", "values.yaml"))[0]
	cm, key := str(vals, "registryCaBundleConfig", "name"), str(vals, "registryCaBundleConfig", "key")
	if want := "create configmap " + cm + " "; cm == "" || !strings.Contains(script["crossplane-ca"], want) {
		t.Errorf("step crossplane-ca does not make the ConfigMap %q that examples/crossplane/values.yaml names:\n%s", cm, script["crossplane-ca"])
	}
	if want := "--from-file=" + key + "="; key == "" || !strings.Contains(script["crossplane-ca"], want) {
		t.Errorf("step crossplane-ca does not put the CA under the key %q that examples/crossplane/values.yaml names:\n%s", key, script["crossplane-ca"])
	}
}

// objectNames returns the metadata.name of every object of package/ and
// examples/.
func objectNames(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, dir := range []string{"package", "examples"} {
		err := filepath.WalkDir(repoPath(dir), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
				return err
			}
			for _, o := range readDocs(t, p) {
				if n := str(o, "metadata", "name"); n != "" {
					out[n] = true
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
