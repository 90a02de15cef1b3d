/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"fmt"
	"os"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

// teamAConfig is a namespaced ProviderConfig of team-a.
const teamAConfig = "team-a-cluster"

var _ = Describe("Tenancy", Label("tenancy"), func() {
	It("keeps a namespaced ProviderConfig to its own namespace: a claim in team-b cannot use team-a's", func(ctx SpecContext) {
		timed("tenancy: team-b claim refused team-a's ProviderConfig", func() {
			for _, ns := range []string{"team-a", "team-b"} {
				ensureNamespace(ctx, ns)
			}
			teamAProviderConfig(ctx)
			// Kubernetes proxies with the namespaced ProviderConfig
			// teamAConfig, which resolves in the claim's namespace: only
			// team-a has one.
			labels := applyComposition(ctx, cluster.BackendKubernetes, "team-a-config", func(input map[string]any) {
				input["providerConfigRef"] = map[string]any{"kind": "ProviderConfig", "name": teamAConfig}
			})
			claim := newClaim("team-b", "borrows-team-a-config", labels)
			Expect(env.c.Client.Create(ctx, claim)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { deleteAndWait(ctx, claim) })

			want := And(ContainSubstring("ProviderConfig"), ContainSubstring(teamAConfig), ContainSubstring("not found"))
			Eventually(ctx, func(g Gomega) {
				cp := composedOf(ctx, g, claim)
				g.Expect(cp.mr.GetNamespace()).To(Equal("team-b"))
				g.Expect(cond(cp.mr, "Synced")).To(And(HavePrefix("False"), want))
				c := get(ctx, g, cluster.ClaimGVK(), "team-b", claim.GetName())
				g.Expect(cond(c, "Ready")).NotTo(HavePrefix("True"))
			}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())
			Eventually(ctx, func(g Gomega) {
				t, err := traceJSON(ctx, "team-b", claim.GetName())
				g.Expect(err).NotTo(HaveOccurred())
				bad := t.unhealthy()
				g.Expect(bad).NotTo(BeEmpty())
				g.Expect(bad[len(bad)-1].Synced).To(want, "trace shows why: %v", bad)
				AddReportEntry("trace of the claim", fmt.Sprint(bad))
			}).WithTimeout(changeTimeout).WithPolling(poll).Should(Succeed())
		})
	})

	It("does not let a claim choose a Composition it is not offered", func(ctx SpecContext) {
		timed("tenancy: claim selecting no Composition reports it", func() {
			ensureNamespace(ctx, "team-a")
			claim := newClaim("team-a", "wants-a-mainframe", map[string]string{LabelBackend: "mainframe"})
			Expect(env.c.Client.Create(ctx, claim)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { deleteAndWait(ctx, claim) })
			Eventually(ctx, func(g Gomega) {
				t, err := traceJSON(ctx, "team-a", claim.GetName())
				g.Expect(err).NotTo(HaveOccurred())
				bad := t.unhealthy()
				g.Expect(bad).NotTo(BeEmpty())
				all := fmt.Sprint(bad)
				cause := bad[len(bad)-1]
				g.Expect(cause.Kind).To(Equal(cluster.CompositeGVK().Kind), "trace points at the XR: %v", bad)
				g.Expect(cause.Synced).To(And(HavePrefix("False"), ContainSubstring("no compatible Compositions found")), "trace says why: %v", bad)
				c := get(ctx, g, cluster.ClaimGVK(), "team-a", claim.GetName())
				g.Expect(cond(c, "Ready")).NotTo(HavePrefix("True"))
				g.Expect(str(c, "spec", "compositionRef", "name")).To(BeEmpty(), "no Composition was chosen")
				AddReportEntry("trace of the claim", all)
			}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())
		})
	})
})

// teamAProviderConfig gives team-a a namespaced kubernetes ProviderConfig
// and the kubeconfig Secret it reads, both in team-a.
func teamAProviderConfig(ctx context.Context) {
	kc, err := os.ReadFile(env.c.InClusterKubeconfig)
	Expect(err).NotTo(HaveOccurred())
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: cluster.KubeconfigSecret},
		Data:       map[string][]byte{"kubeconfig": kc},
	}
	Expect(client.IgnoreAlreadyExists(env.c.Client.Create(ctx, s))).To(Succeed())
	Expect(cluster.Apply(ctx, env.c.Client, cluster.KubernetesProviderConfig("ProviderConfig", "team-a", teamAConfig, ""))).To(Succeed())
}
