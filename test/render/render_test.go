/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package render_test runs the real `crossplane render` against
// function-egressproxy for every example claim, compares the output to golden
// files, and validates examples and output with `crossplane beta validate`.
//
//	go test ./test/render/ -update   # rewrite testdata/ after an intended change
package render_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from what crossplane render prints")

const (
	xrAPIVersion   = "egressproxy.io/v1alpha1"
	xrNameSuffix   = "-x7k2p" // what Crossplane's generateName would add
	labelBackend   = "egressproxy.io/backend"
	labelClaimName = "crossplane.io/claim-name"
	labelClaimNS   = "crossplane.io/claim-namespace"
	transitionTime = "2026-01-01T00:00:00Z"
)

// observedAtProvider is what each backend reports once its proxy serves.
func observedAtProvider(kind string) map[string]any {
	switch kind {
	case "GCPProxy":
		return map[string]any{"endpoint": "203.0.113.20:3128", "egressIPs": []any{"203.0.113.20"},
			"instanceID": "projects/acme/zones/europe-west1-b/instances/partner-api", "state": "Running"}
	case "KVMProxy":
		return map[string]any{"endpoint": "192.168.122.50:8080", "egressIPs": []any{"198.51.100.9"},
			"instanceID": "lab-x7k2p", "state": "Running"}
	default:
		return map[string]any{"endpoint": "10.96.0.10:3128", "egressIPs": []any{"203.0.113.7", "203.0.113.8"},
			"instanceID": "egress-proxies/web-x7k2p", "state": "Running"}
	}
}

func TestRender(t *testing.T) {
	cli := testenv.Tool(t, "crossplane")
	fns := writeFunctions(t, t.TempDir(), startFunction(t))

	claims, err := filepath.Glob(repoPath("examples", "composition", "claim-*.yaml"))
	if err != nil || len(claims) == 0 {
		t.Fatalf("no example claims in examples/composition: %v", err)
	}
	for _, c := range claims {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(c), "claim-"), ".yaml")
		t.Run(name, func(t *testing.T) {
			claim := readDocs(t, c)[0]
			comp := compositionFor(t, claim)
			dir := t.TempDir()
			xr := writeDocs(t, dir, "xr.yaml", xrFor(claim))
			bound := "--required-resources=" + writeDocs(t, dir, "claim.yaml", boundClaim(claim, str(claim, "metadata", "name")+xrNameSuffix))

			// A new claim: the function composes one managed resource, not ready yet.
			out := render(t, cli, xr, comp, fns, bound)
			golden(t, name+".yaml", out)
			mr := composed(t, splitDocs(t, out))
			checkCondition(t, splitDocs(t, out)[0], "WithinGuardrails", "True", "")

			// The managed resource is ready: the XR gets its status and is ready.
			obs := observed(mr)
			out = render(t, cli, xr, comp, fns, bound, "--observed-resources="+writeDocs(t, dir, "observed.yaml", obs))
			golden(t, name+"-observed.yaml", out)
			checkReady(t, splitDocs(t, out)[0], field(obs, "status", "atProvider").(map[string]any))
		})
	}
}

func TestRenderFatal(t *testing.T) {
	cli := testenv.Tool(t, "crossplane")
	fns := writeFunctions(t, t.TempDir(), startFunction(t))

	cases := map[string]struct {
		reason     string
		claim      string
		xr         func(xr map[string]any)
		required   func(claim map[string]any) map[string]any
		input      func(in map[string]any)
		wantStderr string
	}{
		"NoClaimRef": {
			reason:     "An XR created without a claim has no namespace for the managed resource, whatever its labels say.",
			claim:      "claim-kubernetes.yaml",
			xr:         func(xr map[string]any) { delete(mustMap(xr, "spec"), "claimRef") },
			wantStderr: `pipeline step "compose-proxy" returned a fatal result: XEgressProxy web-x7k2p has no spec.claimRef`,
		},
		"ForgedClaim": {
			reason: "An XR that names another team's claim, which is bound to another XR, gets nothing composed in that team's namespace.",
			claim:  "claim-kubernetes.yaml",
			xr: func(xr map[string]any) {
				mustMap(xr, "metadata", "labels")[labelClaimNS] = "team-b"
				mustMap(xr, "spec", "claimRef")["namespace"] = "team-b"
			},
			required: func(claim map[string]any) map[string]any {
				b := boundClaim(claim, "web-b8q4z")
				mustMap(b, "metadata")["namespace"] = "team-b"
				return b
			},
			wantStderr: `returned a fatal result: XEgressProxy web-x7k2p references claim team-b/web in spec.claimRef, but that claim's spec.resourceRef does not name this XEgressProxy`,
		},
		"GCPNoZone": {
			reason:     "A gcp Composition must choose the zone.",
			claim:      "claim-gcp.yaml",
			input:      func(in map[string]any) { delete(mustMap(in, "gcp"), "zone") },
			wantStderr: `returned a fatal result: the function input has no gcp.zone`,
		},
		"UnknownBackend": {
			reason:     "The input must name a backend the function knows.",
			claim:      "claim-kvm.yaml",
			input:      func(in map[string]any) { in["backend"] = "podman" },
			wantStderr: `returned a fatal result: unknown backend "podman" in the function input`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			claim := readDocs(t, repoPath("examples", "composition", tc.claim))[0]
			xr := xrFor(claim)
			if tc.xr != nil {
				tc.xr(xr)
			}
			comp := compositionFor(t, claim)
			if tc.input != nil {
				c := readDocs(t, comp)[0]
				tc.input(mustMap(field(c, "spec", "pipeline").([]any)[0].(map[string]any), "input"))
				comp = writeDocs(t, dir, "composition.yaml", c)
			}
			required := boundClaim(claim, str(xr, "metadata", "name"))
			if tc.required != nil {
				required = tc.required(claim)
			}
			stdout, stderr, err := runCLI(t, cli, renderArgs(writeDocs(t, dir, "xr.yaml", xr), comp, fns,
				"--required-resources="+writeDocs(t, dir, "claim.yaml", required))...)
			if err == nil {
				t.Fatalf("%s\ncrossplane render succeeded, want a fatal result; stdout:\n%s", tc.reason, stdout)
			}
			if !strings.Contains(stderr, tc.wantStderr) {
				t.Errorf("%s\ncrossplane render stderr:\n%s\nwant it to contain: %s", tc.reason, stderr, tc.wantStderr)
			}
		})
	}
}

// writeFunctions writes the Function that makes render call the running
// function instead of pulling and running its image with Docker.
func writeFunctions(t *testing.T, dir, addr string) string {
	t.Helper()
	return writeDocs(t, dir, "functions.yaml", map[string]any{
		"apiVersion": "pkg.crossplane.io/v1",
		"kind":       "Function",
		"metadata": map[string]any{
			"name": "egressproxy-function-egressproxy",
			"annotations": map[string]any{
				"render.crossplane.io/runtime":                    "Development",
				"render.crossplane.io/runtime-development-target": addr,
			},
		},
		"spec": map[string]any{"package": "xpkg.egressproxy.io/egressproxy/function-egressproxy:v0.1.0"},
	})
}

// xrFor returns the XR Crossplane creates for a claim: cluster scoped, with
// the claim's spec minus the claim-only fields, its claim labels and a
// claimRef.
func xrFor(claim map[string]any) map[string]any {
	name, ns := str(claim, "metadata", "name"), str(claim, "metadata", "namespace")
	spec := map[string]any{}
	for k, v := range mustMap(claim, "spec") {
		switch k {
		case "writeConnectionSecretToRef", "compositeDeletePolicy", "resourceRef":
		default:
			spec[k] = v
		}
	}
	spec["claimRef"] = map[string]any{"apiVersion": xrAPIVersion, "kind": "EgressProxyClaim", "name": name, "namespace": ns}
	return map[string]any{
		"apiVersion": xrAPIVersion,
		"kind":       "XEgressProxy",
		"metadata": map[string]any{
			"name":   name + xrNameSuffix,
			"labels": map[string]any{labelClaimName: name, labelClaimNS: ns},
		},
		"spec": spec,
	}
}

// compositionFor returns the Composition file the claim's selector picks.
func compositionFor(t *testing.T, claim map[string]any) string {
	t.Helper()
	want := str(claim, "spec", "compositionSelector", "matchLabels", labelBackend)
	files, _ := filepath.Glob(repoPath("package", "configuration", "composition-*.yaml"))
	for _, f := range files {
		if str(readDocs(t, f)[0], "metadata", "labels", labelBackend) == want {
			return f
		}
	}
	t.Fatalf("no Composition in package/configuration is labelled %s=%q", labelBackend, want)
	return ""
}

func renderArgs(xr, comp, fns string, extra ...string) []string {
	return append([]string{"render", xr, comp, fns,
		"--xrd=" + repoPath("package", "configuration", "xrd.yaml"),
		"--timeout=" + renderTimeout,
		"--include-function-results",
		"--include-full-xr",
	}, extra...)
}

func render(t *testing.T, cli, xr, comp, fns string, extra ...string) string {
	t.Helper()
	stdout, stderr, err := runCLI(t, cli, renderArgs(xr, comp, fns, extra...)...)
	if err != nil {
		t.Fatalf("crossplane render: %v\n%s", err, stderr)
	}
	return stdout
}

// golden compares got to a golden file, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("cannot read golden file (go test ./test/render/ -update writes it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("crossplane render output differs from %s (-want +got; -update rewrites it):\n%s", p, diff)
	}
}

// composed returns the one managed resource of a render's output.
func composed(t *testing.T, docs []map[string]any) map[string]any {
	t.Helper()
	var mrs []map[string]any
	for _, d := range docs {
		if strings.HasSuffix(str(d, "kind"), "Proxy") && strings.Contains(str(d, "apiVersion"), ".m.egressproxy.io/") {
			mrs = append(mrs, d)
		}
	}
	if len(mrs) != 1 {
		t.Fatalf("crossplane render composed %d managed resources, want exactly one", len(mrs))
	}
	if str(mrs[0], "metadata", "namespace") != "team-a" {
		t.Errorf("%s is not in the claim's namespace team-a", describe(mrs[0]))
	}
	return mrs[0]
}

// observed returns the managed resource as Crossplane observes it once the
// provider made the proxy serve.
func observed(mr map[string]any) map[string]any {
	md := mustMap(mr, "metadata")
	if md["name"] == nil {
		md["name"] = str(mr, "metadata", "generateName") + "0123456789ab"
	}
	mr["status"] = map[string]any{
		"atProvider": observedAtProvider(str(mr, "kind")),
		"conditions": []any{
			map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": transitionTime},
			map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "lastTransitionTime": transitionTime},
		},
	}
	return mr
}

// checkReady checks the XR got the proxy's status and is ready.
func checkReady(t *testing.T, xr, atProvider map[string]any) {
	t.Helper()
	want := map[string]any{
		"endpoint":   atProvider["endpoint"],
		"egressIP":   atProvider["egressIPs"].([]any)[0],
		"instanceID": atProvider["instanceID"],
		"ready":      "True",
	}
	got := map[string]any{
		"endpoint":   field(xr, "status", "endpoint"),
		"egressIP":   field(xr, "status", "egressIP"),
		"instanceID": field(xr, "status", "instanceID"),
	}
	conds, _ := field(xr, "status", "conditions").([]any)
	for _, c := range conds {
		if m, _ := c.(map[string]any); str(m, "type") == "Ready" {
			got["ready"] = str(m, "status")
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("XR status after the managed resource is ready: -want +got:\n%s", diff)
	}
}
