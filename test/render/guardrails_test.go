/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package render_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// TestRenderGuardrails renders the kubernetes example claim changed to break
// the guardrails of the example Composition: first as a new claim, then as
// a claim whose managed resource was composed before the change.
func TestRenderGuardrails(t *testing.T) {
	cli := testenv.Tool(t, "crossplane")
	fns := writeFunctions(t, t.TempDir(), startFunction(t))
	dir := t.TempDir()

	claim := readDocs(t, repoPath("examples", "composition", "claim-kubernetes.yaml"))[0]
	comp := compositionFor(t, claim)
	bound := "--required-resources=" + writeDocs(t, dir, "claim.yaml", boundClaim(claim, str(claim, "metadata", "name")+xrNameSuffix))

	// The managed resource composed while the claim was within the guardrails.
	out := render(t, cli, writeDocs(t, dir, "xr.yaml", xrFor(claim)), comp, fns, bound)
	obs := observed(composed(t, splitDocs(t, out)))

	// The claim now also asks for the cloud metadata server.
	spec := mustMap(claim, "spec")
	spec["allowedDestinations"] = append(spec["allowedDestinations"].([]any), "169.254.169.254")
	xr := writeDocs(t, dir, "xr-forbidden.yaml", xrFor(claim))
	const msg = `spec.allowedDestinations[2] "169.254.169.254" is forbidden by guardrails.forbiddenDestinationCIDRs: it overlaps 169.254.0.0/16`

	t.Run("New", func(t *testing.T) {
		out := render(t, cli, xr, comp, fns, bound)
		golden(t, "guardrails.yaml", out)
		docs := splitDocs(t, out)
		checkCondition(t, docs[0], "WithinGuardrails", "False", msg)
		checkCondition(t, docs[0], "Ready", "False", "")
		for _, d := range docs[1:] {
			if str(d, "kind") != "Result" {
				t.Errorf("crossplane render composed %s for a claim that breaks the guardrails", describe(d))
			}
		}
	})
	t.Run("Composed", func(t *testing.T) {
		out := render(t, cli, xr, comp, fns, bound, "--observed-resources="+writeDocs(t, dir, "observed.yaml", obs))
		golden(t, "guardrails-observed.yaml", out)
		docs := splitDocs(t, out)
		checkCondition(t, docs[0], "WithinGuardrails", "False", msg)
		mr := composed(t, docs)
		if diff := cmp.Diff(field(obs, "spec"), field(mr, "spec")); diff != "" {
			t.Errorf("the managed resource composed before the claim broke the guardrails changed: -observed +rendered:\n%s", diff)
		}
	})
}

// TestValidateRejectsGuardrails checks the function input's CRD rejects
// guardrails the function could not apply, naming the field, so
// `crossplane beta validate` catches them before a Composition ships.
func TestValidateRejectsGuardrails(t *testing.T) {
	cli := testenv.Tool(t, "crossplane")
	dir := t.TempDir()
	image, cache := offlineValidateCache(t, cli, dir)
	in := writeDocs(t, dir, "input.yaml", map[string]any{
		"apiVersion": "egressproxy.fn.egressproxy.io/v1alpha1",
		"kind":       "Input",
		"metadata":   map[string]any{"name": "bad"},
		"backend":    "kubernetes",
		"guardrails": map[string]any{
			"allowedDestinationSuffixes": []any{"Bad_Domain"},
			"forbiddenDestinationCIDRs":  []any{"169.254.0.0"},
			"allowedPrivateDestinations": []any{"10.0.0.0"},
			"maxClientCIDRPrefix":        map[string]any{"ipv4": 33, "ipv6": 129},
			"allowedConnectPorts":        []any{0},
			"allowedHTTPPorts":           []any{70000},
		},
	})
	stdout, _, err := runCLI(t, cli, "beta", "validate", repoPath("package", "function", "input"), in,
		"--cache-dir="+cache, "--crossplane-image="+image)
	if err == nil {
		t.Fatalf("crossplane beta validate accepted invalid guardrails:\n%s", stdout)
	}
	for _, want := range []string{
		`guardrails.allowedDestinationSuffixes[0]: Invalid value: "Bad_Domain"`,
		`guardrails.forbiddenDestinationCIDRs[0]: Invalid value: "169.254.0.0": forbiddenDestinationCIDRs entries must be CIDRs`,
		`guardrails.allowedPrivateDestinations[0]: Invalid value: "10.0.0.0": allowedPrivateDestinations entries must be CIDRs`,
		`guardrails.maxClientCIDRPrefix.ipv4: Invalid value: 33`,
		`guardrails.maxClientCIDRPrefix.ipv6: Invalid value: 129`,
		`guardrails.allowedConnectPorts[0]: Invalid value: 0`,
		`guardrails.allowedHTTPPorts[0]: Invalid value: 70000`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("crossplane beta validate output lacks %q:\n%s", want, stdout)
		}
	}
}
