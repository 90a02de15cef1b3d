/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"regexp"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

const (
	permissionsNS     = "team-permissions"
	injectedConfig    = "injected-identity"
	permissionsProxy1 = "rbac-bound"
	permissionsProxy2 = "rbac-unbound"
)

var (
	gvkK8sProxy         = schema.GroupVersionKind{Group: "kubernetes.m.egressproxy.io", Version: "v1alpha1", Kind: "KubernetesProxy"}
	gvkK8sClusterConfig = schema.GroupVersionKind{Group: "kubernetes.m.egressproxy.io", Version: "v1alpha1", Kind: "ClusterProviderConfig"}
	// forbidden is how the Kubernetes backend names a missing permission.
	forbidden = regexp.MustCompile(`may not (get|list|create|update|patch|delete) ([a-z]+(\.[a-z.]+)?)`)
)

// The provider runs as the ServiceAccount Crossplane made for its pod; the
// Kubernetes backend with credentials.source InjectedIdentity manages
// proxies in the provider's own cluster as that ServiceAccount, with what
// Crossplane grants plus the ClusterRole of examples/rbac the platform team
// binds (the harness does, as that file says).
var _ = Describe("the provider's own identity (InjectedIdentity)", Ordered, Label("kubernetes", "permissions"), func() {
	BeforeAll(func(ctx SpecContext) {
		if env.c.Node == nil {
			skipUnless(cluster.BackendKubernetes)
		}
		ensureNamespace(ctx, permissionsNS)
		ensureNamespace(ctx, cluster.ProxyNamespace)
		pc := cluster.Object(gvkK8sClusterConfig)
		pc.SetName(injectedConfig)
		pc.Object["spec"] = map[string]any{
			"credentials":       map[string]any{"source": "InjectedIdentity"},
			"allowedNamespaces": []any{cluster.ProxyNamespace},
			"allowedImages":     []any{env.c.SquidImage},
		}
		Expect(cluster.Apply(ctx, env.c.Client, pc)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { deleteAndWait(ctx, pc) })
	})

	It("manages a proxy in its own cluster with the ClusterRole the platform team bound", func(ctx SpecContext) {
		mr := injectedProxy(permissionsProxy1)
		Expect(env.c.Client.Create(ctx, mr)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { deleteAndWait(ctx, mr) })
		Eventually(ctx, func(g Gomega) {
			g.Expect(cond(get(ctx, g, gvkK8sProxy, permissionsNS, mr.GetName()), "Synced")).To(HavePrefix("True"))
		}).WithTimeout(changeTimeout).WithPolling(poll).Should(Succeed())
	})

	It("names the permission it lacks when that ClusterRole is unbound, and goes on once it is bound again", func(ctx SpecContext) {
		b := &rbacv1.ClusterRoleBinding{}
		Expect(env.c.Client.Get(ctx, client.ObjectKey{Name: cluster.RoleInjectedIdentity}, b)).To(Succeed())
		saved := b.DeepCopy()
		Expect(env.c.Client.Delete(ctx, b)).To(Succeed())
		restore := func(ctx context.Context) {
			r := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: saved.Name, Labels: saved.Labels}, RoleRef: saved.RoleRef, Subjects: saved.Subjects}
			Expect(env.c.Client.Create(ctx, r)).To(Succeed())
		}
		restored := false
		DeferCleanup(func(ctx SpecContext) {
			if !restored {
				restore(ctx)
			}
		})
		mr := injectedProxy(permissionsProxy2)
		Expect(env.c.Client.Create(ctx, mr)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { deleteAndWait(ctx, mr) })
		var seen string
		Eventually(ctx, func(g Gomega) {
			seen = cond(get(ctx, g, gvkK8sProxy, permissionsNS, mr.GetName()), "Synced")
			g.Expect(seen).To(And(HavePrefix("False"), MatchRegexp(forbidden.String())))
		}).WithTimeout(changeTimeout).WithPolling(poll).Should(Succeed())
		GinkgoWriter.Printf("without %s: KubernetesProxy Synced=%s\n", cluster.RoleInjectedIdentity, seen)
		restore(ctx)
		restored = true
		Eventually(ctx, func(g Gomega) {
			g.Expect(cond(get(ctx, g, gvkK8sProxy, permissionsNS, mr.GetName()), "Synced")).To(HavePrefix("True"))
		}).WithTimeout(changeTimeout).WithPolling(poll).Should(Succeed())
	})
})

// injectedProxy is a KubernetesProxy in permissionsNS through the
// InjectedIdentity config.
func injectedProxy(name string) *unstructured.Unstructured {
	mr := cluster.Object(gvkK8sProxy)
	mr.SetNamespace(permissionsNS)
	mr.SetName(name)
	mr.Object["spec"] = map[string]any{
		"forProvider": map[string]any{"namespace": cluster.ProxyNamespace, "image": env.c.SquidImage,
			"allowedClientCIDRs": []any{"10.0.0.0/8"}, "allowedDestinations": []any{"api.stripe.com"}},
		"providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": injectedConfig},
	}
	return mr
}
