/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"bufio"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

var (
	gvkLock = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1beta1", Kind: "Lock"}
	// gvkXRDv2 reads XRDs without the apiserver's warning that v1 is
	// deprecated, which a poll would log every second.
	gvkXRDv2 = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v2", Kind: "CompositeResourceDefinition"}
	// installTimeout bounds a Configuration's install or removal: the
	// package manager's revisions, the XRD's CRDs.
	installTimeout = 3 * time.Minute
)

// Each Configuration works on its own: a platform team may install either
// (docs/getting-started.md). The suite installs both, so each in turn is
// removed, the other is checked alone, and the removed one is installed
// again as the harness installed it.
var _ = Describe("one Configuration only", Ordered, Label("install"), func() {
	BeforeAll(func() { skipUnless(cluster.BackendKubernetes) })

	for i, alone := range cluster.Configurations {
		other := cluster.Configurations[1-i]
		It(fmt.Sprintf("serves %s with %s removed: its own dependencies in the lock, a %s Ready", alone.Name, other.Name, apiOf(alone.Name)), func(ctx SpecContext) {
			otherXRD := xrdOf(other.Name)
			pkg := get(ctx, Default, gvkConfigPkg, "", other.Name)
			ref := str(pkg, "spec", "package")
			t := time.Now()
			DeferCleanup(func(ctx SpecContext) { reinstall(ctx, other.Name, ref, otherXRD) })
			Expect(env.c.Client.Delete(ctx, pkg)).To(Succeed())
			Eventually(ctx, func() bool {
				return gone(ctx, gvkConfigPkg, "", other.Name) && gone(ctx, gvkXRDv2, "", otherXRD)
			}).WithTimeout(installTimeout).WithPolling(time.Second).Should(BeTrue(), "%s and its XRD %s removed", other.Name, otherXRD)
			GinkgoWriter.Printf("%s and its XRD removed in %s\n", other.Name, time.Since(t).Round(100*time.Millisecond))

			// The lock holds the one Configuration, with the Provider and
			// the Function as its own dependencies: installed alone, the
			// package manager installs them for it.
			Eventually(ctx, func(g Gomega) {
				lock := get(ctx, g, gvkLock, "", "lock")
				pkgs, _, _ := unstructured.NestedSlice(lock.Object, "packages")
				var sources, deps []string
				for _, p := range pkgs {
					m, _ := p.(map[string]any)
					src := fmt.Sprint(m["source"])
					sources = append(sources, src)
					if !strings.HasSuffix(src, "/"+alone.Name) {
						continue
					}
					ds, _ := m["dependencies"].([]any)
					for _, d := range ds {
						dm, _ := d.(map[string]any)
						deps = append(deps, filepath.Base(fmt.Sprint(dm["package"])))
					}
				}
				sort.Strings(deps)
				g.Expect(deps).To(Equal([]string{"function-egressproxy", "provider-egressproxy"}), "the dependencies of %s in the lock (packages %v)", alone.Name, sources)
				g.Expect(sources).NotTo(ContainElement(HaveSuffix("/"+other.Name)), "the lock still holds %s", other.Name)
			}).WithTimeout(changeTimeout).WithPolling(time.Second).Should(Succeed())
			for _, p := range []struct {
				gvk  schema.GroupVersionKind
				name string
			}{{gvkConfigPkg, alone.Name}, {gvkProvider, cluster.ProviderName}, {gvkFunction, cluster.FunctionName}} {
				u := get(ctx, Default, p.gvk, "", p.name)
				Expect(cond(u, "Installed")).To(HavePrefix("True:"), "%s %s", p.gvk.Kind, p.name)
				Expect(cond(u, "Healthy")).To(HavePrefix("True:"), "%s %s", p.gvk.Kind, p.name)
			}

			// Its API composes a Kubernetes proxy.
			ensureNamespace(ctx, "team-a")
			var u *unstructured.Unstructured
			name := "alone-" + strings.TrimPrefix(alone.Name, "configuration-")
			sel := map[string]string{LabelBackend: string(cluster.BackendKubernetes)}
			if alone.Name == cluster.Configurations[0].Name {
				u = newClaim("team-a", name, sel)
			} else {
				u = newNamespacedXR("team-a", name, sel)
			}
			t = time.Now()
			Expect(env.c.Client.Create(ctx, u)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { deleteAndWait(ctx, u) })
			Eventually(ctx, func(g Gomega) {
				got := get(ctx, g, u.GroupVersionKind(), u.GetNamespace(), u.GetName())
				g.Expect(cond(got, "Ready")).To(HavePrefix("True:"))
			}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())
			GinkgoWriter.Printf("with only %s installed, %s %s/%s Ready in %s\n", alone.Name, u.GetKind(), u.GetNamespace(), u.GetName(),
				time.Since(t).Round(100*time.Millisecond))
		})
	}
})

// apiOf names the API a Configuration serves, for spec names.
func apiOf(cfg string) string {
	if cfg == cluster.Configurations[0].Name {
		return "claim"
	}
	return "namespaced XR"
}

// xrdOf returns the name of the XRD of a Configuration's package.
func xrdOf(cfg string) string {
	files, err := cluster.ConfigurationFiles()
	Expect(err).NotTo(HaveOccurred())
	part := ""
	for _, c := range cluster.Configurations {
		if c.Name == cfg {
			part = c.Part
		}
	}
	for _, f := range files {
		if filepath.Base(filepath.Dir(f)) != part {
			continue
		}
		b, err := os.ReadFile(f) //nolint:gosec // Files of this repository.
		Expect(err).NotTo(HaveOccurred())
		objs, err := cluster.Decode(filepath.Base(f), b)
		Expect(err).NotTo(HaveOccurred())
		for _, o := range objs {
			if o.GetKind() == gvkXRD.Kind {
				return o.GetName()
			}
		}
	}
	Fail("no XRD in the package of " + cfg)
	return ""
}

// reinstall applies a Configuration of package ref as the harness does,
// and waits until it is installed and healthy and its XRD serves its API
// again (established, and offering its claim if it has one).
func reinstall(ctx SpecContext, name, ref, xrd string) {
	u := cluster.Object(gvkConfigPkg)
	u.SetName(name)
	Expect(unstructured.SetNestedField(u.Object, ref, "spec", "package")).To(Succeed())
	t := time.Now()
	Expect(cluster.Apply(ctx, env.c.Client, u)).To(Succeed())
	Eventually(ctx, func(g Gomega) {
		p := get(ctx, g, gvkConfigPkg, "", name)
		g.Expect(cond(p, "Installed")).To(HavePrefix("True:"))
		g.Expect(cond(p, "Healthy")).To(HavePrefix("True:"))
		x := get(ctx, g, gvkXRDv2, "", xrd)
		g.Expect(cond(x, "Established")).To(HavePrefix("True:"))
		if _, claims, _ := unstructured.NestedMap(x.Object, "spec", "claimNames"); claims {
			g.Expect(cond(x, "Offered")).To(HavePrefix("True:"))
		}
	}).WithTimeout(installTimeout).WithPolling(time.Second).Should(Succeed())
	GinkgoWriter.Printf("%s installed again in %s\n", name, time.Since(t).Round(100*time.Millisecond))
}

// The provider's requests to the API server, from the apiserver's audit
// log. A request is the provider's when it comes from a provider pod that
// runs now (its address, since it started) or carries the user agent of the
// provider binary's clients ("provider/...", the binary's name; its
// informers' watches say only Go-http-client) or of its Kubernetes backend
// ("provider-egressproxy"). Each is made as the ServiceAccount Crossplane
// made for the provider, or, by the Kubernetes backend, as the kubeconfig
// of a provider config's Secret, which here is the harness's admin.
var _ = Describe("the provider's identity", Label("install"), func() {
	It("makes every request as its ServiceAccount, or as the credentials a provider config names (audit log)", func(ctx SpecContext) {
		if env.c.AuditLog() == "" {
			Skip("no real node, no audit log: " + env.c.NoRealNode)
		}
		ns, name, _ := strings.Cut(env.c.ProviderServiceAccount, ":")
		sa := "system:serviceaccount:" + ns + ":" + name
		admin := adminUser()
		pods, err := env.c.ProviderPods(ctx)
		Expect(err).NotTo(HaveOccurred())
		since := map[string]time.Time{}
		for _, p := range pods {
			Expect(p.Status.PodIP).NotTo(BeEmpty(), "pod %s", p.Name)
			Expect(p.Status.StartTime).NotTo(BeNil(), "pod %s", p.Name)
			since[p.Status.PodIP] = p.Status.StartTime.Time
		}
		byUser, did := auditOfProvider(env.c.AuditLog(), since)
		if fi, err := os.Stat(env.c.AuditLog()); err == nil {
			GinkgoWriter.Printf("audit log: %.1f MB\n", float64(fi.Size())/1e6)
		}
		GinkgoWriter.Printf("the provider's requests (pods %v) by source and user: %v\n", since, byUser)
		GinkgoWriter.Printf("%s did: %v\n", sa, did[sa])
		Expect(byUser["binary "+sa]).To(BeNumerically(">", 0), "no request of the provider binary (user agent provider/...) in the audit log: %v", byUser)
		Expect(byUser["pod "+sa]).To(BeNumerically(">", 0), "no request from a provider pod in the audit log: %v", byUser)
		for k, n := range byUser {
			source, user, _ := strings.Cut(k, " ")
			switch source {
			case "binary":
				Expect(user).To(Equal(sa), "the provider binary made %d requests as %s", n, user)
			case "backend", "pod":
				Expect(user).To(BeElementOf(sa, admin, unauthenticated), "the provider (%s) made %d requests as %s", source, n, user)
			}
		}
		Expect(did[sa]).To(ContainElement("watch kubernetesproxies"), "requests of %s", sa)
	})
})

// unauthenticated stands for the user of a request the apiserver refused
// with 401.
const unauthenticated = "<refused: 401>"

// adminUser is the user of the harness's admin credentials, which its
// kubeconfig Secret for the Kubernetes backend carries.
func adminUser() string {
	b, _ := pem.Decode(env.c.Config.CertData)
	Expect(b).NotTo(BeNil(), "the admin's client certificate")
	crt, err := x509.ParseCertificate(b.Bytes)
	Expect(err).NotTo(HaveOccurred())
	return crt.Subject.CommonName
}

// auditOfProvider reads an audit log and counts the provider's requests by
// how they are known and by user: "binary USER" by the binary's user
// agent, else "pod USER" from a pod address of since after its time, else
// "backend USER" by the backend's user agent. It
// returns what each user did there ("verb resource[/subresource]").
func auditOfProvider(file string, since map[string]time.Time) (map[string]int, map[string][]string) {
	f, err := os.Open(file) //nolint:gosec // The apiserver's log.
	Expect(err).NotTo(HaveOccurred())
	defer f.Close() //nolint:errcheck // Read only.
	byUser, did := map[string]int{}, map[string][]string{}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<22)
	for s.Scan() {
		var e struct {
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			User      struct {
				Username string `json:"username"`
			} `json:"user"`
			SourceIPs []string  `json:"sourceIPs"`
			Received  time.Time `json:"requestReceivedTimestamp"`
			ObjectRef struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if json.Unmarshal(s.Bytes(), &e) != nil {
			continue
		}
		if e.User.Username == "" && e.ResponseStatus.Code == 401 {
			// Credentials the apiserver does not know (the health specs'
			// configs with a made-up token): refused before they are anyone.
			e.User.Username = unauthenticated
		}
		fromPod := false
		for _, ip := range e.SourceIPs {
			if t, ok := since[ip]; ok && !e.Received.Before(t) {
				fromPod = true
			}
		}
		switch {
		case strings.HasPrefix(e.UserAgent, "provider/"):
			byUser["binary "+e.User.Username]++
		case fromPod:
			byUser["pod "+e.User.Username]++
		case strings.HasPrefix(e.UserAgent, "provider-egressproxy"):
			byUser["backend "+e.User.Username]++
		default:
			continue
		}
		r := e.Verb + " " + e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			r += "/" + e.ObjectRef.Subresource
		}
		if !slices.Contains(did[e.User.Username], r) {
			did[e.User.Username] = append(did[e.User.Username], r)
		}
	}
	Expect(s.Err()).NotTo(HaveOccurred())
	return byUser, did
}
