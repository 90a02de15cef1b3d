/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

// nsXRGVK is the namespaced XR (Crossplane v2) of
// package/configuration-namespaced.
var nsXRGVK = schema.GroupVersionKind{Group: "namespaced.egressproxy.io", Version: "v1alpha1", Kind: "EgressProxy"}

// nsXRResource is the namespaced XR's resource for crossplane beta trace:
// qualified, since the claim API has a kind of the same name.
const nsXRResource = "egressproxies.namespaced.egressproxy.io"

// nsTeam is the app namespace of the namespaced XRs: not team-a, so that
// nothing of the claim specs can make them pass.
const nsTeam = "team-ns"

// A namespacedCase is one backend for the namespaced XR specs.
type namespacedCase struct {
	backend      cluster.Backend
	readyTimeout time.Duration
	// backendGone is the backend's check that a deleted proxy left nothing.
	backendGone func(ctx context.Context, g Gomega, mr *unstructured.Unstructured)
}

// describeNamespaced registers the specs of a namespaced EgressProxy XR on
// one backend, in order from creation to deletion; describeBackend calls it
// for every backend. Each selects the shipped Composition of its backend, as
// the harness adapts it to this machine (the real node's squid image, the
// libvirt sandbox's guest image) for the claim API and the namespaced one
// alike.
func describeNamespaced(nc namespacedCase) bool {
	return Describe(fmt.Sprintf("Namespaced EgressProxy XRs on the %s backend", nc.backend), Ordered, ContinueOnFailure,
		Label("namespaced", string(nc.backend)), func() {
			r := &namespacedRun{nc: nc, name: "e2e-ns-" + string(nc.backend)}
			BeforeAll(func(ctx SpecContext) {
				skipUnless(nc.backend)
				ensureNamespace(ctx, nsTeam)
				r.xr = newNamespacedXR(nsTeam, r.name, map[string]string{LabelBackend: string(nc.backend)})
				DeferCleanup(func(ctx SpecContext) { deleteAndWait(ctx, r.xr) })
			})
			It("composes an XR in "+nsTeam+" into a managed resource in "+nsTeam+", all Synced and Ready, with no claim", r.becomesReady)
			It("writes endpoint, port, username, password and url to the Secret the XR names, in "+nsTeam, r.writesSecret)
			It("lets a user with only the RoleBinding of examples/rbac/namespaced-xr-user.yaml trace the XR", r.traces)
			if nc.backend == cluster.BackendKubernetes {
				// One backend shows the function's part; the providers'
				// own tests show rotation on every backend.
				It("rotates the generated password when the XR gets a new "+commonv1alpha1.AnnotationKeyCredentialsRotation+" annotation", r.rotates)
			}
			It("removes the managed resource and everything on the backend when the XR is deleted", r.deletes)
		})
}

// namespacedRun is the state the ordered specs of one backend share.
type namespacedRun struct {
	nc   namespacedCase
	name string
	xr   *unstructured.Unstructured
	mr   *unstructured.Unstructured
	// ready is set once the XR was Ready: the later specs need that.
	ready bool
}

// newNamespacedXR returns a namespaced XR as an app team writes it
// (examples/namespaced): the claim's spec, the selector under
// spec.crossplane.
func newNamespacedXR(ns, name string, selector map[string]string) *unstructured.Unstructured {
	sel := map[string]any{}
	for k, v := range selector {
		sel[k] = v
	}
	u := cluster.Object(nsXRGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	u.Object["spec"] = map[string]any{
		"crossplane":                 map[string]any{"compositionSelector": map[string]any{"matchLabels": sel}},
		"allowedClientCIDRs":         []any{"10.0.0.0/8"},
		"allowedDestinations":        []any{"api.example.com", ".example.org"},
		"writeConnectionSecretToRef": map[string]any{"name": name + "-proxy"},
	}
	return u
}

func (r *namespacedRun) afterReady() {
	if !r.ready {
		Skip("the namespaced XR never became Ready (see the first spec)")
	}
}

// composedMR returns the XR and its one managed resource, from the XR's
// spec.crossplane.resourceRefs, which a namespaced XR keeps without
// namespaces: everything it composes is in its own namespace.
func (r *namespacedRun) composedMR(ctx context.Context, g Gomega) (*unstructured.Unstructured, *unstructured.Unstructured) {
	xr := get(ctx, g, nsXRGVK, nsTeam, r.name)
	refs, _, _ := unstructured.NestedSlice(xr.Object, "spec", "crossplane", "resourceRefs")
	g.Expect(refs).To(HaveLen(1), "the XR composes exactly one managed resource")
	ref, _ := refs[0].(map[string]any)
	gvk := schema.FromAPIVersionAndKind(fmt.Sprint(ref["apiVersion"]), fmt.Sprint(ref["kind"]))
	return xr, get(ctx, g, gvk, nsTeam, fmt.Sprint(ref["name"]))
}

func (r *namespacedRun) becomesReady(ctx SpecContext) {
	notWired := ""
	timed(string(r.nc.backend)+": namespaced XR created -> Ready", func() {
		Expect(env.c.Client.Create(ctx, r.xr)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			xr, mr := r.composedMR(ctx, g)
			if m := cond(mr, "Synced"); strings.Contains(m, msgNotBuiltIn) {
				notWired = m
				return
			}
			g.Expect(mr.GetNamespace()).To(Equal(nsTeam), "the managed resource lives in the XR's namespace")
			g.Expect(mr.GroupVersionKind()).To(Equal(cluster.ManagedGVK(r.nc.backend)))
			g.Expect(cond(mr, "Synced")).To(HavePrefix("True"), "managed resource %s", mr.GetName())
			g.Expect(cond(mr, "Ready")).To(HavePrefix("True"), "managed resource %s", mr.GetName())
			g.Expect(cond(xr, "Synced")).To(HavePrefix("True"), "XR")
			g.Expect(cond(xr, "Ready")).To(HavePrefix("True"), "XR")
			g.Expect(str(xr, "status", "endpoint")).To(Equal(str(mr, "status", "atProvider", "endpoint")))
			g.Expect(str(xr, "status", "backend")).To(Equal(string(r.nc.backend)))
			r.mr = mr
		}).WithTimeout(r.nc.readyTimeout).WithPolling(poll).Should(Succeed())
	})
	if notWired != "" {
		Skip(notWired)
	}
	r.ready = true
}

func (r *namespacedRun) writesSecret(ctx SpecContext) {
	r.afterReady()
	Eventually(ctx, func(g Gomega) {
		s := &corev1.Secret{}
		g.Expect(env.c.Client.Get(ctx, client.ObjectKey{Namespace: nsTeam, Name: r.name + "-proxy"}, s)).To(Succeed())
		g.Expect(s.Data).To(SatisfyAll(HaveKey("endpoint"), HaveKey("port"), HaveKey("username"), HaveKey("password"), HaveKey("url")))
		g.Expect(len(s.Data["password"])).To(BeNumerically(">=", 16), "a generated password is long")
		u, err := url.Parse(string(s.Data["url"]))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(u.Host).To(Equal(string(s.Data["endpoint"])))
		g.Expect(u.User.Username()).To(Equal(string(s.Data["username"])))
	}).WithTimeout(changeTimeout).WithPolling(poll).Should(Succeed())
}

// rotates annotates the XR as an app team would to rotate its generated
// password: the function puts the annotation on the managed resource, whose
// new password reaches the Secret the XR names.
func (r *namespacedRun) rotates(ctx SpecContext) {
	r.afterReady()
	before := &corev1.Secret{}
	Expect(env.c.Client.Get(ctx, client.ObjectKey{Namespace: nsTeam, Name: r.name + "-proxy"}, before)).To(Succeed())
	const rotation = "e2e-1"
	annotate(ctx, get(ctx, Default, nsXRGVK, nsTeam, r.name), commonv1alpha1.AnnotationKeyCredentialsRotation, rotation)
	Eventually(ctx, func(g Gomega) {
		_, mr := r.composedMR(ctx, g)
		g.Expect(mr.GetAnnotations()).To(HaveKeyWithValue(commonv1alpha1.AnnotationKeyCredentialsRotation, rotation), "the managed resource carries the XR's annotation")
		s := &corev1.Secret{}
		g.Expect(env.c.Client.Get(ctx, client.ObjectKey{Namespace: nsTeam, Name: r.name + "-proxy"}, s)).To(Succeed())
		g.Expect(len(s.Data["password"])).To(BeNumerically(">=", 16), "a generated password is long")
		g.Expect(s.Data["password"]).NotTo(Equal(before.Data["password"]), "the password is a new one")
		u, err := url.Parse(string(s.Data["url"]))
		g.Expect(err).NotTo(HaveOccurred())
		pw, _ := u.User.Password()
		g.Expect(pw).To(Equal(string(s.Data["password"])), "the URL carries the new password")
		g.Expect(cond(mr, "Ready")).To(HavePrefix("True"), "managed resource %s", mr.GetName())
		g.Expect(cond(mr, "Synced")).To(HavePrefix("True"), "managed resource %s", mr.GetName())
	}).WithTimeout(changeTimeout).WithPolling(poll).Should(Succeed())
}

// traces binds examples/rbac/namespaced-xr-user.yaml in the XR's namespace
// and runs crossplane beta trace as a user of the bound group, impersonated
// through its kubeconfig: the trace shows the XR and its managed resource,
// both Synced and Ready. In another namespace the same user may not read an
// XR.
func (r *namespacedRun) traces(ctx SpecContext) {
	r.afterReady()
	group := applyNamespacedRBAC(ctx, nsTeam)
	kubeconfig := impersonatingKubeconfig(group)

	Eventually(ctx, func(g Gomega) {
		out, err := traceAs(ctx, kubeconfig, nsTeam, r.name)
		g.Expect(err).NotTo(HaveOccurred())
		t := &traced{}
		g.Expect(json.Unmarshal([]byte(out), t)).To(Succeed())
		g.Expect(t.Object.GroupVersionKind()).To(Equal(nsXRGVK))
		g.Expect(t.Children).To(HaveLen(1), "the trace shows the managed resource")
		g.Expect(t.Children[0].Object.GroupVersionKind()).To(Equal(cluster.ManagedGVK(r.nc.backend)))
		g.Expect(t.unhealthy()).To(BeEmpty(), "the user reads every resource of the trace, all Synced and Ready")
	}).WithTimeout(changeTimeout).WithPolling(poll).Should(Succeed())

	_, err := traceAs(ctx, kubeconfig, "team-a", r.name)
	Expect(err).To(MatchError(ContainSubstring("forbidden")), "the RoleBinding grants nothing outside "+nsTeam)
}

// deletes deletes the XR and waits until its managed resource and the
// backend's instance are gone.
func (r *namespacedRun) deletes(ctx SpecContext) {
	r.afterReady()
	timed(string(r.nc.backend)+": namespaced XR deleted -> backend empty", func() {
		Expect(env.c.Client.Delete(ctx, r.xr)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			g.Expect(gone(ctx, nsXRGVK, nsTeam, r.name)).To(BeTrue(), "XR")
			g.Expect(gone(ctx, r.mr.GroupVersionKind(), nsTeam, r.mr.GetName())).To(BeTrue(), "managed resource")
			r.nc.backendGone(ctx, g, r.mr)
		}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())
	})
}

// applyNamespacedRBAC applies the ClusterRole and RoleBinding of
// examples/rbac/namespaced-xr-user.yaml, the RoleBinding in namespace ns,
// and returns the group it binds.
func applyNamespacedRBAC(ctx context.Context, ns string) string {
	f := filepath.Join(testenv.RepoRoot(), "examples", "rbac", "namespaced-xr-user.yaml")
	b, err := os.ReadFile(f) //nolint:gosec // A file of this repository.
	Expect(err).NotTo(HaveOccurred())
	objs, err := cluster.Decode(filepath.Base(f), b)
	Expect(err).NotTo(HaveOccurred())
	group := ""
	for _, o := range objs {
		if o.GetKind() != "RoleBinding" {
			continue
		}
		o.SetNamespace(ns)
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		Expect(subjects).To(HaveLen(1))
		group = fmt.Sprint(subjects[0].(map[string]any)["name"])
	}
	Expect(group).NotTo(BeEmpty(), "%s binds no group", f)
	Expect(cluster.Apply(ctx, env.c.Client, objs...)).To(Succeed())
	return group
}

// impersonatingKubeconfig writes a copy of the cluster's kubeconfig that
// impersonates a user in group, and returns its path. The admin may
// impersonate; the user then has only what RBAC grants the group (and
// system:authenticated, which may read API discovery).
func impersonatingKubeconfig(group string) string {
	cfg, err := clientcmd.LoadFromFile(env.c.Kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	for _, a := range cfg.AuthInfos {
		a.Impersonate = "developer@" + nsTeam
		a.ImpersonateGroups = []string{group}
	}
	p := filepath.Join(GinkgoT().TempDir(), "kubeconfig-"+nsTeam)
	Expect(clientcmd.WriteToFile(*cfg, p)).To(Succeed())
	return p
}

// traceAs runs crossplane beta trace -o json on a namespaced XR with a
// kubeconfig.
func traceAs(ctx context.Context, kubeconfig, ns, name string) (string, error) {
	cmd := exec.CommandContext(ctx, env.c.Tools.Crossplane, "beta", "trace", nsXRResource, name, "-n", ns, "-o", "json")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("crossplane beta trace: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
