/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package render_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// TestValidate runs `crossplane beta validate`, offline, on the example
// claims and on every rendered XR and managed resource in testdata, against
// the provider's CRDs and the XRD; and on the package's XRD and Compositions
// against Crossplane's own CRDs, and on their function inputs against the
// function's input CRD.
func TestValidate(t *testing.T) {
	cli := testenv.Tool(t, "crossplane")
	dir := t.TempDir()
	image, cache := offlineValidateCache(t, cli, dir)

	// The example Secret is left out: validate knows no core schemas, and
	// --error-on-missing-schemas must catch a claim or MR without a schema.
	claims, _ := filepath.Glob(repoPath("examples", "composition", "claim-*.yaml"))
	nsXRs, _ := filepath.Glob(repoPath("examples", "namespaced", "egressproxy-*.yaml"))
	rendered := renderedObjects(t, dir)
	compositions, _ := filepath.Glob(repoPath("package", "configuration", "composition-*.yaml"))
	nsCompositions, _ := filepath.Glob(repoPath("package", "configuration-namespaced", "composition-*.yaml"))

	extensions := strings.Join([]string{
		repoPath("package", "provider", "crds"),
		repoPath("package", "configuration", "xrd.yaml"),
		repoPath("package", "configuration-namespaced", "xrd.yaml"),
		repoPath("package", "function", "input"),
	}, ",")
	// validate checks the function input of each Composition's pipeline
	// steps too, against the input CRD.
	resources := append(append(append(claims, rendered), compositions...), repoPath("package", "configuration", "xrd.yaml"))
	resources = append(append(append(resources, nsXRs...), nsCompositions...), repoPath("package", "configuration-namespaced", "xrd.yaml"))
	// The runtime configs (DeploymentRuntimeConfig, ImageConfig) against
	// Crossplane's own schemas.
	runtimes, _ := filepath.Glob(repoPath("examples", "runtime", "*.yaml"))
	if len(runtimes) == 0 {
		t.Fatal("no runtime configs in examples/runtime")
	}
	resources = append(resources, runtimes...)

	stdout, stderr, err := runCLI(t, cli, "beta", "validate", extensions, strings.Join(resources, ","),
		"--cache-dir="+cache, "--crossplane-image="+image, "--error-on-missing-schemas")
	t.Logf("crossplane beta validate:\n%s", stdout)
	if err != nil {
		t.Fatalf("crossplane beta validate: %v\n%s", err, stderr)
	}
	if strings.Contains(stdout, "downloading") {
		t.Errorf("crossplane beta validate tried to download schemas; it must run offline")
	}
}

// offlineValidateCache returns a Crossplane image name and a validate cache
// that already holds that image's CRDs. crossplane beta validate (v2.2)
// always loads the schemas of a Crossplane image, and downloads them unless
// its cache has them; an empty --crossplane-image does not turn that off, it
// means the default image. Seeding the cache with the CRDs from the Go module
// of the same Crossplane version keeps it offline, and validates
// Compositions and XRDs too.
func offlineValidateCache(t *testing.T, cli, dir string) (string, string) {
	t.Helper()
	version := cliVersion(t, cli)
	crds := crossplaneCRDs(t, version)

	image := "xpkg.crossplane.io/crossplane/crossplane:" + version
	cache := filepath.Join(dir, "validate-cache")
	seeded := filepath.Join(cache, strings.ReplaceAll(image, ":", "@"))
	if err := os.MkdirAll(seeded, 0o700); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(crds, "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(seeded, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return image, cache
}

// cliVersion returns the version of the crossplane module the CLI was built
// from. `crossplane version --client` prints nothing unless the build set
// the version with -ldflags, so read the binary's build information.
func cliVersion(t *testing.T, cli string) string {
	t.Helper()
	gobin := testenv.LookPath(t, "go", "the Go toolchain reads the CLI's build information")
	b, err := exec.Command(gobin, "version", "-m", cli).Output()
	if err != nil {
		t.Fatalf("go version -m %s: %v", cli, err)
	}
	m := regexp.MustCompile(`github\.com/crossplane/crossplane/v2\s+(v\d+\.\d+\.\d+\S*)`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("cannot find the crossplane module version in the build information of %s:\n%s", cli, b)
	}
	return m[1]
}

// crossplaneCRDs returns the cluster/crds folder of the crossplane module of
// the CLI's version, downloading the module into the module cache if needed
// (hack/tools.sh already did when it built the CLI).
func crossplaneCRDs(t *testing.T, version string) string {
	t.Helper()
	gobin := testenv.LookPath(t, "go", "the Go toolchain finds Crossplane's CRDs in the module cache")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "mod", "download", "-json", "github.com/crossplane/crossplane/v2@"+version)
	cmd.Dir = t.TempDir() // outside the module: do not touch its go.mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	b, err := cmd.Output()
	if err != nil {
		testenv.Missing(t, "cannot download github.com/crossplane/crossplane/v2@%s for its CRDs: %v", version, err)
	}
	m := struct{ Dir string }{}
	if err := json.Unmarshal(b, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download -json: %v: %s", err, b)
	}
	return filepath.Join(m.Dir, "cluster", "crds")
}

// renderedObjects writes the XRs and managed resources of the golden render
// outputs to one file, without the Result documents, which have no schema.
// A new managed resource only has a generateName in render's output; it is
// named the way Crossplane names it before creating it (a 12 character hash
// suffix), so the CRD's rules on metadata.name can be checked.
func renderedObjects(t *testing.T, dir string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no golden render outputs in testdata (go test ./test/render/ -run TestRender -update)")
	}
	var objs []map[string]any
	for _, f := range files {
		for _, d := range readDocs(t, f) {
			if str(d, "kind") == "Result" {
				continue
			}
			if md := mustMap(d, "metadata"); md["name"] == nil && md["generateName"] != nil {
				md["name"] = str(d, "metadata", "generateName") + "0123456789ab"
			}
			objs = append(objs, d)
		}
	}
	return writeDocs(t, dir, "rendered.yaml", objs...)
}

// TestValidateRejects checks the XRD rejects what the managed resources
// would reject, with messages naming the field, before a claim gets as far
// as the function.
func TestValidateRejects(t *testing.T) {
	cli := testenv.Tool(t, "crossplane")
	dir := t.TempDir()
	image, cache := offlineValidateCache(t, cli, dir)
	claim := writeDocs(t, dir, "bad.yaml", map[string]any{
		"apiVersion": xrAPIVersion,
		"kind":       "EgressProxyClaim",
		"metadata":   map[string]any{"name": "bad", "namespace": "team-a"},
		"spec": map[string]any{
			"port":                70000,
			"allowedClientCIDRs":  []any{"10.0.0.300/8"},
			"allowedDestinations": []any{"Bad_Host!", "ok.example.com"},
			"allowedConnectPorts": []any{0},
			"allowedHTTPPorts":    []any{},
			"size":                "huge",
		},
	})
	stdout, _, err := runCLI(t, cli, "beta", "validate", repoPath("package", "configuration", "xrd.yaml"), claim,
		"--cache-dir="+cache, "--crossplane-image="+image)
	if err == nil {
		t.Fatalf("crossplane beta validate accepted an invalid claim:\n%s", stdout)
	}
	for _, want := range []string{
		`spec.port: Invalid value: 70000`,
		`spec.allowedClientCIDRs[0]: Invalid value: "10.0.0.300/8": spec.allowedClientCIDRs entries must be CIDRs`,
		`spec.allowedDestinations[0]: Invalid value: "Bad_Host!": spec.allowedDestinations entries must be a lower-case host name`,
		`spec.allowedConnectPorts[0]: Invalid value: 0`,
		`spec.allowedHTTPPorts: Invalid value: 0`,
		`spec.size: Unsupported value: "huge"`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("crossplane beta validate output lacks %q:\n%s", want, stdout)
		}
	}
}
