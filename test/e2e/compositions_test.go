/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best dot-imported.
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

// applyComposition applies the shipped Composition of backend b
// (package/configuration) as one only the claims that select labelE2E=label
// get, and deletes it when the spec ends; it returns the labels that select
// it. The Composition has no guardrails, so that a claim may allow a private
// destination and see squid refuse it; mod, if not nil, changes the
// function's input further.
func applyComposition(ctx context.Context, b cluster.Backend, label string, mod func(input map[string]any)) map[string]string {
	f := filepath.Join(testenv.RepoRoot(), "package", "configuration", "composition-"+string(b)+".yaml")
	data, err := os.ReadFile(f) //nolint:gosec // A file of this repository.
	Expect(err).NotTo(HaveOccurred())
	objs, err := cluster.Decode(f, data)
	Expect(err).NotTo(HaveOccurred())
	Expect(objs).To(HaveLen(1), "%s holds one Composition", f)
	comp := objs[0]
	comp.SetName("xegressproxies-e2e-" + label)
	comp.SetLabels(map[string]string{labelE2E: label})
	steps, _, err := unstructured.NestedSlice(comp.Object, "spec", "pipeline")
	Expect(err).NotTo(HaveOccurred())
	Expect(steps).To(HaveLen(1), "the Composition has one step, the function's")
	input := steps[0].(map[string]any)["input"].(map[string]any) //nolint:forcetypeassert // Decoded YAML; a panic fails the spec.
	delete(input, "guardrails")
	if mod != nil {
		mod(input)
	}
	Expect(unstructured.SetNestedSlice(comp.Object, steps, "spec", "pipeline")).To(Succeed())
	Expect(cluster.Apply(ctx, env.c.Client, comp)).To(Succeed(), "Composition %s", comp.GetName())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(env.c.Client.Delete(ctx, comp))).To(Succeed())
	})
	return comp.GetLabels()
}
