/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package render_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// The namespaced XR API (package/configuration-namespaced).
const (
	nsXRAPIVersion = "namespaced.egressproxy.io/v1alpha1"
	nsXRKind       = "EgressProxy"
)

// TestRenderNamespaced renders every example namespaced XR (Crossplane v2)
// with the Composition its selector picks: no claim is required, the
// managed resource is composed in the XR's namespace and writes the
// connection Secret the XR names there.
func TestRenderNamespaced(t *testing.T) {
	cli := testenv.Tool(t, "crossplane")
	fns := writeFunctions(t, t.TempDir(), startFunction(t))

	xrs, err := filepath.Glob(repoPath("examples", "namespaced", "egressproxy-*.yaml"))
	if err != nil || len(xrs) == 0 {
		t.Fatalf("no example namespaced XRs in examples/namespaced: %v", err)
	}
	for _, f := range xrs {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "egressproxy-"), ".yaml")
		t.Run(name, func(t *testing.T) {
			xr := readDocs(t, f)[0]
			if str(xr, "apiVersion") != nsXRAPIVersion || str(xr, "kind") != nsXRKind || str(xr, "metadata", "namespace") == "" {
				t.Fatalf("%s is not a namespaced %s %s", f, nsXRAPIVersion, nsXRKind)
			}
			comp := nsCompositionFor(t, xr)
			dir := t.TempDir()
			in := writeDocs(t, dir, "xr.yaml", xr)

			out := renderNamespaced(t, cli, in, comp, fns)
			golden(t, "namespaced-"+name+".yaml", out)
			docs := splitDocs(t, out)
			mr := composed(t, docs)
			checkCondition(t, docs[0], "WithinGuardrails", "True", "")
			if got, want := str(mr, "spec", "writeConnectionSecretToRef", "name"), str(xr, "spec", "writeConnectionSecretToRef", "name"); got != want {
				t.Errorf("%s writes connection Secret %q, want the one the XR names, %q", describe(mr), got, want)
			}

			obs := observed(mr)
			out = renderNamespaced(t, cli, in, comp, fns, "--observed-resources="+writeDocs(t, dir, "observed.yaml", obs))
			golden(t, "namespaced-"+name+"-observed.yaml", out)
			checkReady(t, splitDocs(t, out)[0], field(obs, "status", "atProvider").(map[string]any))
		})
	}
}

// TestNamespacedSharesClaimAPI checks the namespaced package offers what the
// claim package does: the XRD's schema and printer columns are the claim
// API's plus spec.writeConnectionSecretToRef (Crossplane adds that to a
// claim, not to a namespaced XR), and each backend's Composition runs the
// same function with the same input.
func TestNamespacedSharesClaimAPI(t *testing.T) {
	claimXRD := readDocs(t, repoPath("package", "configuration", "xrd.yaml"))[0]
	nsXRD := readDocs(t, repoPath("package", "configuration-namespaced", "xrd.yaml"))[0]

	if got := str(nsXRD, "spec", "scope"); got != "Namespaced" {
		t.Errorf("namespaced XRD scope: got %q, want Namespaced", got)
	}
	if got := str(nsXRD, "spec", "group") + "/" + str(nsXRD, "spec", "names", "kind"); got != "namespaced.egressproxy.io/"+nsXRKind {
		t.Errorf("namespaced XRD kind: got %s, want namespaced.egressproxy.io/%s", got, nsXRKind)
	}
	want := withoutDescriptions(field(claimXRD, "spec", "versions"))
	got := withoutDescriptions(field(nsXRD, "spec", "versions"))
	for _, v := range got.([]any) {
		props := mustMap(v.(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties")
		if props["writeConnectionSecretToRef"] == nil {
			t.Errorf("namespaced XRD version %s has no spec.writeConnectionSecretToRef", str(v.(map[string]any), "name"))
		}
		delete(props, "writeConnectionSecretToRef")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("namespaced XRD versions differ from the claim XRD's (-claim +namespaced):\n%s", diff)
	}

	claimComps, _ := filepath.Glob(repoPath("package", "configuration", "composition-*.yaml"))
	for _, f := range claimComps {
		c := readDocs(t, f)[0]
		backend := str(c, "metadata", "labels", labelBackend)
		nsFile := repoPath("package", "configuration-namespaced", filepath.Base(f))
		n := readDocs(t, nsFile)[0]
		if got := str(n, "metadata", "labels", labelBackend); got != backend {
			t.Errorf("%s: label %s is %q, want %q as in %s", nsFile, labelBackend, got, backend, f)
		}
		if got := str(n, "spec", "compositeTypeRef", "apiVersion") + " " + str(n, "spec", "compositeTypeRef", "kind"); got != nsXRAPIVersion+" "+nsXRKind {
			t.Errorf("%s composes %s, want %s %s", nsFile, got, nsXRAPIVersion, nsXRKind)
		}
		if diff := cmp.Diff(field(c, "spec", "pipeline"), field(n, "spec", "pipeline")); diff != "" {
			t.Errorf("%s: pipeline differs from %s's (-claim +namespaced):\n%s", nsFile, f, diff)
		}
	}
}

// withoutDescriptions returns a copy of a schema without description fields,
// which may name the claim or the namespaced XR.
func withoutDescriptions(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if k != "description" {
				out[k] = withoutDescriptions(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = withoutDescriptions(e)
		}
		return out
	default:
		return v
	}
}

// nsCompositionFor returns the Composition file of the namespaced package
// that a namespaced XR's selector (under spec.crossplane) picks.
func nsCompositionFor(t *testing.T, xr map[string]any) string {
	t.Helper()
	want := str(xr, "spec", "crossplane", "compositionSelector", "matchLabels", labelBackend)
	files, _ := filepath.Glob(repoPath("package", "configuration-namespaced", "composition-*.yaml"))
	for _, f := range files {
		if str(readDocs(t, f)[0], "metadata", "labels", labelBackend) == want {
			return f
		}
	}
	t.Fatalf("no Composition in package/configuration-namespaced is labelled %s=%q", labelBackend, want)
	return ""
}

func renderNamespaced(t *testing.T, cli, xr, comp, fns string, extra ...string) string {
	t.Helper()
	args := append([]string{"render", xr, comp, fns,
		"--xrd=" + repoPath("package", "configuration-namespaced", "xrd.yaml"),
		"--timeout=" + renderTimeout,
		"--include-function-results",
		"--include-full-xr",
	}, extra...)
	stdout, stderr, err := runCLI(t, cli, args...)
	if err != nil {
		t.Fatalf("crossplane render: %v\n%s", err, stderr)
	}
	return stdout
}

// TestValidateRejectsNamespaced checks the namespaced XRD rejects what the
// claim XRD rejects, and a connection Secret name that is not a Secret name,
// with messages naming the field.
func TestValidateRejectsNamespaced(t *testing.T) {
	cli := testenv.Tool(t, "crossplane")
	dir := t.TempDir()
	image, cache := offlineValidateCache(t, cli, dir)
	xr := writeDocs(t, dir, "bad.yaml", map[string]any{
		"apiVersion": nsXRAPIVersion,
		"kind":       nsXRKind,
		"metadata":   map[string]any{"name": "bad", "namespace": "team-a"},
		"spec": map[string]any{
			"port":                       70000,
			"allowedClientCIDRs":         []any{"10.0.0.300/8"},
			"size":                       "huge",
			"writeConnectionSecretToRef": map[string]any{"name": "Bad_Name"},
		},
	})
	stdout, _, err := runCLI(t, cli, "beta", "validate", repoPath("package", "configuration-namespaced", "xrd.yaml"), xr,
		"--cache-dir="+cache, "--crossplane-image="+image)
	if err == nil {
		t.Fatalf("crossplane beta validate accepted an invalid namespaced XR:\n%s", stdout)
	}
	for _, want := range []string{
		`spec.port: Invalid value: 70000`,
		`spec.allowedClientCIDRs[0]: Invalid value: "10.0.0.300/8": spec.allowedClientCIDRs entries must be CIDRs`,
		`spec.size: Unsupported value: "huge"`,
		`spec.writeConnectionSecretToRef.name: Invalid value: "Bad_Name": spec.writeConnectionSecretToRef.name must be a Secret name`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("crossplane beta validate output lacks %q:\n%s", want, stdout)
		}
	}
}
