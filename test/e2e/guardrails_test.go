/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

// The platform team's guardrails, in the Compositions' function input
// (package/configuration), and the function's refusal to trust an XR's
// word about which claim and namespace it belongs to.
var _ = Describe("Guardrails", Label("tenancy", "guardrails"), func() {
	It("does not compose a claim that asks for the metadata server, and says which field broke which rule", func(ctx SpecContext) {
		timed("guardrails: claim asking for 169.254.169.254 refused", func() {
			skipUnless(cluster.BackendKubernetes)
			ensureNamespace(ctx, "team-a")
			claim := newClaim("team-a", "breaks-guardrails", map[string]string{LabelBackend: string(cluster.BackendKubernetes)})
			Expect(unstructured.SetNestedStringSlice(claim.Object, []string{"api.example.com", "169.254.169.254"}, "spec", "allowedDestinations")).To(Succeed())
			Expect(env.c.Client.Create(ctx, claim)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { deleteAndWait(ctx, claim) })

			Eventually(ctx, func(g Gomega) {
				c := get(ctx, g, cluster.ClaimGVK(), "team-a", claim.GetName())
				g.Expect(cond(c, "WithinGuardrails")).To(And(
					HavePrefix("False"),
					ContainSubstring(`spec.allowedDestinations[1] "169.254.169.254"`),
					ContainSubstring("guardrails.forbiddenDestinationCIDRs")))
				g.Expect(cond(c, "Ready")).NotTo(HavePrefix("True"))
				xrName := str(c, "spec", "resourceRef", "name")
				g.Expect(xrName).NotTo(BeEmpty())
				xr := get(ctx, g, cluster.CompositeGVK(), "", xrName)
				refs, _, _ := unstructured.NestedSlice(xr.Object, "spec", "resourceRefs")
				g.Expect(refs).To(BeEmpty(), "nothing is composed for a claim that breaks a guardrail")
			}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())

			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(cluster.ManagedGVK(cluster.BackendKubernetes).GroupVersion().WithKind("KubernetesProxyList"))
			Expect(env.c.Client.List(ctx, l, client.InNamespace("team-a"))).To(Succeed())
			for _, mr := range l.Items {
				Expect(mr.GetLabels()["crossplane.io/claim-name"]).NotTo(Equal(claim.GetName()), "a KubernetesProxy was composed for the refused claim")
			}
		})
	})

	It("ignores an XR that claims to belong to another team's namespace", func(ctx SpecContext) {
		timed("guardrails: forged XR composes nothing in team-b", func() {
			skipUnless(cluster.BackendKubernetes)
			ensureNamespace(ctx, "team-b")
			xr := cluster.Object(cluster.CompositeGVK())
			xr.SetName("forged-for-team-b")
			xr.SetLabels(map[string]string{
				"crossplane.io/claim-namespace": "team-b",
				"crossplane.io/claim-name":      "ghost",
			})
			xr.Object["spec"] = map[string]any{
				"compositionSelector": map[string]any{"matchLabels": map[string]any{LabelBackend: string(cluster.BackendKubernetes)}},
				"allowedClientCIDRs":  []any{"10.0.0.0/8"},
				"allowedDestinations": []any{"api.example.com"},
				"claimRef": map[string]any{
					"apiVersion": cluster.ClaimGVK().GroupVersion().String(),
					"kind":       cluster.ClaimGVK().Kind,
					"namespace":  "team-b",
					"name":       "ghost",
				},
			}
			Expect(env.c.Client.Create(ctx, xr)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { deleteAndWait(ctx, xr) })

			Eventually(ctx, func(g Gomega) {
				got := get(ctx, g, cluster.CompositeGVK(), "", xr.GetName())
				g.Expect(cond(got, "Synced")).To(And(HavePrefix("False"), ContainSubstring("team-b/ghost")))
				refs, _, _ := unstructured.NestedSlice(got.Object, "spec", "resourceRefs")
				g.Expect(refs).To(BeEmpty())
			}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())
			Consistently(ctx, func(g Gomega) {
				l := &unstructured.UnstructuredList{}
				l.SetGroupVersionKind(cluster.ManagedGVK(cluster.BackendKubernetes).GroupVersion().WithKind("KubernetesProxyList"))
				g.Expect(env.c.Client.List(ctx, l, client.MatchingLabels{"crossplane.io/composite": xr.GetName()})).To(Succeed())
				g.Expect(l.Items).To(BeEmpty(), "nothing may be composed for a forged XR")
			}).WithTimeout(poll * 12).WithPolling(poll).Should(Succeed())
		})
	})
})
