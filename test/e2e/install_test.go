/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/pkgruntime"
)

var (
	gvkCRD        = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	gvkXRD        = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "CompositeResourceDefinition"}
	gvkMRD        = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1alpha1", Kind: "ManagedResourceDefinition"}
	gvkComp       = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "Composition"}
	gvkConfigRev  = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "ConfigurationRevision"}
	gvkProvider   = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Provider"}
	gvkFunction   = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Function"}
	gvkConfigPkg  = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Configuration"}
	gvkProvRev    = pkgruntime.ProviderRevision
	providerGroup = ".m.egressproxy.io"
)

// The suite's control plane is installed the way users install the project
// (internal/testenv/cluster): the harness applies the two Configurations and
// the activation policy, and Crossplane's package manager does the rest.
var _ = Describe("installed by Crossplane's package manager", func() {
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
		for _, r := range list(ctx, gvkProvRev, client.MatchingLabels{pkgruntime.LabelPackage: cluster.ProviderName}) {
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

	It("runs the provider as its ServiceAccount, with no other credentials", func(ctx SpecContext) {
		p := env.c.ProviderProcess
		Expect(p).NotTo(BeNil())
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID()))
		Expect(err).NotTo(HaveOccurred())
		var kubeconfig string
		for _, kv := range bytes.Split(environ, []byte{0}) {
			if k, v, ok := strings.Cut(string(kv), "="); ok && k == "KUBECONFIG" {
				kubeconfig = v
			}
		}
		Expect(kubeconfig).NotTo(BeEmpty(), "the provider's KUBECONFIG")
		kc, err := clientcmd.LoadFromFile(kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		for name, a := range kc.AuthInfos {
			Expect(a.Token).NotTo(BeEmpty(), "user %s of the provider's kubeconfig: a ServiceAccount token", name)
			Expect(a.ClientCertificateData).To(BeEmpty(), "user %s: no client certificate", name)
			Expect(a.ClientCertificate).To(BeEmpty(), "user %s: no client certificate", name)
		}
		who, err := pkgruntime.WhoAmI(ctx, kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		Expect(who).To(Equal("system:serviceaccount:" + env.c.ProviderServiceAccount))
		GinkgoWriter.Printf("the provider (pid %d) authenticates as %s\n", p.PID(), who)
	})
})

var _ = Describe("a Configuration that cannot be installed", func() {
	It("shows Crossplane's own condition for a missing tag and touches nothing running", func(ctx SpecContext) {
		sa, pid := env.c.ProviderServiceAccount, env.c.ProviderProcess.PID()
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
		Expect(list(ctx, gvkConfigRev, client.MatchingLabels{pkgruntime.LabelPackage: bad.GetName()})).To(BeEmpty())
		// The installed packages keep running.
		for _, cfg := range cluster.Configurations {
			Expect(cond(get(ctx, Default, gvkConfigPkg, "", cfg.Name), "Healthy")).To(HavePrefix("True:"), cfg.Name)
		}
		Expect(env.c.ProviderServiceAccount).To(Equal(sa))
		Expect(env.c.ProviderProcess.PID()).To(Equal(pid))
		Expect(env.c.ProviderProcess.Exited()).NotTo(BeClosed())
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
