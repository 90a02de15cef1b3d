/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

var (
	gvkCRD            = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	gvkXRD            = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "CompositeResourceDefinition"}
	gvkMRD            = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1alpha1", Kind: "ManagedResourceDefinition"}
	gvkComp           = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "Composition"}
	gvkConfigRev      = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "ConfigurationRevision"}
	gvkProvider       = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Provider"}
	gvkFunction       = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Function"}
	gvkConfigPkg      = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Configuration"}
	gvkProvRev        = cluster.ProviderRevision
	gvkReplicaSet     = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}
	gvkDeployment     = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	gvkServiceAccount = schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}
	providerGroup     = ".m.egressproxy.io"
)

// The suite's control plane is installed the way users install the project
// (internal/testenv/cluster): the harness applies the two Configurations and
// the activation policy, and Crossplane's package manager does the rest.
var _ = Describe("installed by Crossplane's package manager", Label("install"), func() {
	It("has the provider's CRDs, the XRDs and the Compositions from the packages, owned by their revisions", func(ctx SpecContext) {
		// The packages: the two Configurations the harness applied, and
		// the Provider and Function the package manager installed for them
		// from the same registry.
		for _, p := range []struct {
			gvk  schema.GroupVersionKind
			name string
		}{{gvkProvider, cluster.ProviderName}, {gvkFunction, cluster.FunctionName},
			{gvkConfigPkg, cluster.Configurations[0].Name}, {gvkConfigPkg, cluster.Configurations[1].Name}} {
			u := get(ctx, Default, p.gvk, "", p.name)
			Expect(str(u, "spec", "package")).To(HavePrefix(env.c.PackageRepo+"/"), "%s %s", p.gvk.Kind, p.name)
			Expect(cond(u, "Installed")).To(HavePrefix("True:"), "%s %s", p.gvk.Kind, p.name)
		}

		// Every CRD of the provider's groups is controlled by the active
		// ProviderRevision, directly or through its ManagedResourceDefinition.
		var active []string
		for _, r := range list(ctx, gvkProvRev, client.MatchingLabels{cluster.LabelPackage: cluster.ProviderName}) {
			if str(&r, "spec", "desiredState") == "Active" {
				active = append(active, r.GetName())
			}
		}
		Expect(active).To(HaveLen(1), "active ProviderRevisions")
		prev := active[0]
		crds := list(ctx, gvkCRD)
		n := 0
		for i := range crds {
			crd := &crds[i]
			if !strings.HasSuffix(crd.GetName(), providerGroup) {
				continue
			}
			n++
			kind, owner := controllerOf(crd)
			if kind == gvkMRD.Kind {
				mrd := get(ctx, Default, gvkMRD, "", owner)
				kind, owner = controllerOf(mrd)
			}
			Expect(kind+" "+owner).To(Equal(gvkProvRev.Kind+" "+prev), "CRD %s", crd.GetName())
		}
		shipped, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "package", "provider", "crds", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(Equal(len(shipped)), "the provider's CRDs in the cluster, against package/provider/crds")

		// The XRDs and the shipped Compositions are controlled by the
		// ConfigurationRevisions (tests add Compositions of their own,
		// named otherwise).
		cfgRevs := map[string]bool{}
		for _, r := range list(ctx, gvkConfigRev) {
			cfgRevs[r.GetName()] = true
		}
		owned := func(u *unstructured.Unstructured) {
			kind, owner := controllerOf(u)
			Expect(kind).To(Equal(gvkConfigRev.Kind), "%s %s", u.GetKind(), u.GetName())
			Expect(cfgRevs).To(HaveKey(owner), "%s %s", u.GetKind(), u.GetName())
		}
		xrds := list(ctx, gvkXRD)
		Expect(xrds).To(HaveLen(len(cluster.Configurations)))
		for i := range xrds {
			owned(&xrds[i])
		}
		files, err := cluster.ConfigurationFiles()
		Expect(err).NotTo(HaveOccurred())
		comps := 0
		for _, f := range files {
			b, err := os.ReadFile(f) //nolint:gosec // Files of this repository.
			Expect(err).NotTo(HaveOccurred())
			objs, err := cluster.Decode(filepath.Base(f), b)
			Expect(err).NotTo(HaveOccurred())
			for _, o := range objs {
				if o.GetKind() != gvkComp.Kind {
					continue
				}
				comps++
				owned(get(ctx, Default, gvkComp, "", o.GetName()))
			}
		}
		GinkgoWriter.Printf("from the registry %s: %d provider CRDs (ProviderRevision %s), %d XRDs and %d Compositions (ConfigurationRevisions)\n",
			env.c.PackageRepo, n, prev, len(xrds), comps)
	})

	It("runs the provider and the function as pods Crossplane's Deployment runtime made from the pushed package images, the provider as the ServiceAccount Crossplane made", func(ctx SpecContext) {
		for _, p := range []struct {
			gvk       schema.GroupVersionKind
			pkg, repo string
			rev       string
			pods      func(context.Context) ([]corev1.Pod, error)
		}{
			{cluster.ProviderRevision, cluster.ProviderName, "provider-egressproxy", env.c.ProviderRevisionName, env.c.ProviderPods},
			{cluster.FunctionRevision, cluster.FunctionName, "function-egressproxy", env.c.FunctionRevisionName, env.c.FunctionPods},
		} {
			rev := get(ctx, Default, p.gvk, "", p.rev)
			image := str(rev, "spec", "image")
			digest := env.c.PackageDigests[image]
			Expect(digest).To(HavePrefix("sha256:"), "the digest pushed for %s (pushed: %v)", image, env.c.PackageDigests)
			pods, err := p.pods(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(pods).NotTo(BeEmpty(), "pods of %s", p.rev)
			for _, pod := range pods {
				// Pod → ReplicaSet → Deployment → the revision.
				kind, rs := controllerOf(asUnstructured(&pod))
				Expect(kind).To(Equal("ReplicaSet"), "pod %s", pod.Name)
				kind, deploy := controllerOf(get(ctx, Default, gvkReplicaSet, cluster.CrossplaneNamespace, rs))
				Expect(kind).To(Equal("Deployment"), "ReplicaSet %s", rs)
				kind, owner := controllerOf(get(ctx, Default, gvkDeployment, cluster.CrossplaneNamespace, deploy))
				Expect(kind+" "+owner).To(Equal(p.gvk.Kind+" "+p.rev), "Deployment %s", deploy)
				Expect(pod.Status.ContainerStatuses).NotTo(BeEmpty(), "pod %s", pod.Name)
				st := pod.Status.ContainerStatuses[0]
				Expect(pod.Spec.Containers[0].Image).To(HavePrefix(env.c.PackageRepo+"/"+p.repo), "pod %s", pod.Name)
				Expect(st.ImageID).To(HaveSuffix("@"+digest), "pod %s runs the image pushed as %s", pod.Name, image)
				Expect(st.Ready).To(BeTrue(), "pod %s", pod.Name)
				for _, ct := range pod.Spec.Containers {
					for _, e := range ct.Env {
						Expect(e.Name).NotTo(Equal("KUBECONFIG"), "pod %s: no credentials but its ServiceAccount's", pod.Name)
					}
				}
				GinkgoWriter.Printf("%s %s: pod %s on %s runs %s (%s), as %s\n", p.gvk.Kind, p.rev, pod.Name, pod.Spec.NodeName,
					pod.Spec.Containers[0].Image, digest, pod.Spec.ServiceAccountName)
				if p.gvk != cluster.ProviderRevision {
					continue
				}
				ns, name, _ := strings.Cut(env.c.ProviderServiceAccount, ":")
				Expect(pod.Namespace + ":" + pod.Spec.ServiceAccountName).To(Equal(ns + ":" + name))
				sa := get(ctx, Default, gvkServiceAccount, ns, name)
				Expect(sa.GetOwnerReferences()).To(ContainElement(HaveField("Kind", p.gvk.Kind)), "the ServiceAccount Crossplane made")
				who, err := cluster.WhoAmI(ctx, serviceAccountConfig(ctx, ns, name))
				Expect(err).NotTo(HaveOccurred())
				Expect(who).To(Equal("system:serviceaccount:" + ns + ":" + name))
			}
		}
	})
})

var _ = Describe("a Configuration that cannot be installed", Label("install"), func() {
	It("shows Crossplane's own condition for a missing tag and touches nothing running", func(ctx SpecContext) {
		sa := env.c.ProviderServiceAccount
		before, err := env.c.ProviderPods(ctx)
		Expect(err).NotTo(HaveOccurred())
		bad := cluster.Object(gvkConfigPkg)
		bad.SetName("configuration-egressproxy-missing")
		Expect(unstructured.SetNestedField(bad.Object, env.c.PackageRepo+"/"+cluster.Configurations[0].Name+":v9.9.9", "spec", "package")).To(Succeed())
		Expect(env.c.Client.Create(ctx, bad)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { deleteAndWait(ctx, bad) })
		Eventually(ctx, func(g Gomega) {
			u := get(ctx, g, gvkConfigPkg, "", bad.GetName())
			g.Expect(cond(u, "Installed")).To(And(HavePrefix("False:"), ContainSubstring("v9.9.9")))
			GinkgoWriter.Printf("Configuration %s: Installed=%s\n", bad.GetName(), cond(u, "Installed"))
		}).WithTimeout(changeTimeout).WithPolling(poll).Should(Succeed())
		Expect(list(ctx, gvkConfigRev, client.MatchingLabels{cluster.LabelPackage: bad.GetName()})).To(BeEmpty())
		// The installed packages keep running.
		for _, cfg := range cluster.Configurations {
			Expect(cond(get(ctx, Default, gvkConfigPkg, "", cfg.Name), "Healthy")).To(HavePrefix("True:"), cfg.Name)
		}
		Expect(env.c.ProviderServiceAccount).To(Equal(sa))
		after, err := env.c.ProviderPods(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(podRuns(after)).To(Equal(podRuns(before)), "the provider's pods, their containers' restarts")
	})
})

// list returns the objects of a kind.
func list(ctx SpecContext, gvk schema.GroupVersionKind, opts ...client.ListOption) []unstructured.Unstructured {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	Expect(env.c.Client.List(ctx, l, opts...)).To(Succeed())
	return l.Items
}

// controllerOf returns the kind and name of an object's controller.
func controllerOf(u *unstructured.Unstructured) (string, string) {
	for _, o := range u.GetOwnerReferences() {
		if o.Controller != nil && *o.Controller {
			return o.Kind, o.Name
		}
	}
	return "", ""
}

// asUnstructured converts a typed object for controllerOf.
func asUnstructured(o runtime.Object) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	Expect(err).NotTo(HaveOccurred())
	return &unstructured.Unstructured{Object: m}
}

// serviceAccountConfig reaches the API server with only a token of the
// ServiceAccount namespace/name, as its pods do.
func serviceAccountConfig(ctx context.Context, namespace, name string) *rest.Config {
	cs, err := kubernetes.NewForConfig(env.c.Config)
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return &rest.Config{Host: env.c.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: env.c.Config.CAData}, BearerToken: tr.Status.Token}
}

// podRuns names each pod with its containers' restarts.
func podRuns(pods []corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		r := int32(0)
		for _, s := range p.Status.ContainerStatuses {
			r += s.RestartCount
		}
		out = append(out, fmt.Sprintf("%s restarts=%d", p.Name, r))
	}
	return out
}
