/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/traffic"
)

// msgNotBuiltIn is part of the message of a managed resource whose backend
// the provider does not build in.
const msgNotBuiltIn = "backend is not available in this build of the provider"

// A backendCase is what the shared specs need to know about one backend.
type backendCase struct {
	backend cluster.Backend
	// egressIP matches the egress IP the claim reports.
	egressIP OmegaMatcher
	// backendGone asserts that the backend holds nothing of a deleted
	// proxy, whose managed resource was mr.
	backendGone func(ctx context.Context, g Gomega, mr *unstructured.Unstructured)
	// failure sets up a claim whose backend fails, and the message that
	// must explain it.
	failure failureCase
	// readyTimeout bounds a proxy's way to Ready; the suite's readyTimeout
	// when zero. A real guest boots for a while under TCG.
	readyTimeout time.Duration
	// traffic sends real requests through the proxy; nil skips the
	// "serves traffic" specs (a hook for backends that cannot yet).
	traffic *trafficCase
	// instance reads, from the backend itself (not from the managed
	// resource), what identifies the running instance: a live change
	// must leave all of it unchanged. nil skips that check.
	instance func(ctx context.Context, g Gomega, mr *unstructured.Unstructured) instanceIdentity
	// accessLog reads the proxy's recent access log lines where the
	// platform finds them (the pods' logs, a VM's journal). nil skips the
	// access log check.
	accessLog func(ctx context.Context, g Gomega, mr *unstructured.Unstructured) string
}

// instanceIdentity is what must not change when a configuration is applied
// live: the instance (or Deployment) ID, its creation time and, on a VM, the
// boot ID the guest reports (a reboot changes it).
type instanceIdentity struct {
	ID, CreatedAt, BootID string
}

func (bc backendCase) timeout() time.Duration {
	if bc.readyTimeout != 0 {
		return bc.readyTimeout
	}
	return readyTimeout
}

// A failureCase makes a backend fail for one claim.
type failureCase struct {
	// what the failure is, for the spec's name.
	what string
	// setup breaks the backend (or applies a Composition that does) and
	// returns the labels the failing claim selects its Composition by.
	setup func(ctx context.Context) map[string]string
	// cleanup, if not nil, undoes setup; it runs before the failing claim
	// is deleted.
	cleanup func(ctx context.Context)
	// message matches the managed resource's Synced or Ready message.
	message OmegaMatcher
}

// describeBackend registers the end-to-end specs of one backend: they run in
// order on one claim, from creation to deletion, then a failing one.
// ContinueOnFailure: one broken behaviour (say, no connection Secret) must
// not hide whether the others work.
func describeBackend(bc backendCase) bool {
	described[bc.backend] = true
	describeNamespaced(namespacedCase{backend: bc.backend, readyTimeout: bc.timeout(), backendGone: bc.backendGone})
	return Describe(fmt.Sprintf("EgressProxy claims on the %s backend", bc.backend), Ordered, ContinueOnFailure, Label(string(bc.backend)), func() {
		r := &backendRun{bc: bc, ns: "team-a", name: "e2e-" + string(bc.backend)}
		BeforeAll(func(ctx SpecContext) {
			skipUnless(bc.backend)
			ensureNamespace(ctx, r.ns)
			r.claim = newClaim(r.ns, r.name, map[string]string{LabelBackend: string(bc.backend)})
			// One claim serves the traffic specs too: a KVM proxy boots a
			// real guest for each (re)configuration.
			r.traffic = setUpTraffic(ctx, bc, r.claim)
			DeferCleanup(func(ctx SpecContext) { deleteAndWait(ctx, r.claim) })
		})
		It("turns a claim in team-a into an XR and a managed resource in team-a, all Ready", r.becomesReady)
		It("shows the endpoint and egress IP on the claim, as the managed resource reports them", r.showsStatus)
		It("writes endpoint, port, username, password and url to the claim's connection Secret", r.writesSecret)
		It("serves traffic through the connection Secret's URL: allowed host over HTTP and CONNECT 200, other host 403, "+
			"no or wrong credentials 407, client outside allowedClientCIDRs and private destination refused", r.servesTraffic)
		It("counts known traffic in the provider's metrics (requests allowed, denied by destination, by auth, by client) "+
			"and logs each request on the proxy without its password", r.countsTraffic)
		It("applies an allowlist change and then a password rotation without an outage: under a continuous load no request both "+
			"configurations allow fails, a tunnel opened before stays usable, Ready stays True, the instance stays the same, "+
			"and the new rule is enforced (time printed)", r.changesWithoutOutage)
		It("serves traffic after the allowlist change: the new host works, the removed one is refused", r.servesChangedAllowlist)
		It("serves traffic after the password rotation: the new password works, the old one stops", r.servesRotatedPassword)
		if bc.backend == cluster.BackendKubernetes {
			// The namespaced XR specs show the password rotating; this
			// shows Crossplane's part of the claim's path.
			It("carries the claim's "+commonv1alpha1.AnnotationKeyCredentialsRotation+" annotation to the managed resource", r.carriesRotation)
		}
		It("removes the XR, the managed resource and everything on the backend when the claim is deleted", r.deletes)
		It(fmt.Sprintf("explains a failing backend (%s) on the claim and in crossplane beta trace", bc.failure.what), func(ctx SpecContext) {
			r.wiredOrSkip()
			failingBackend(ctx, bc, r.ns)
		})
	})
}

// backendRun is the state the ordered specs of one backend share.
type backendRun struct {
	bc       backendCase
	ns, name string
	claim    *unstructured.Unstructured
	// last is what the claim was composed into when last looked at.
	last composed
	// notWired is set when the provider says the backend is not built in
	// (an older provider build): the rest is skipped.
	notWired string
	// ready is set once the claim was Ready: the later specs need that.
	ready bool
	// traffic is set when the claim's traffic can be checked here.
	traffic *trafficRun
}

func (r *backendRun) wiredOrSkip() {
	if r.notWired != "" {
		Skip(r.notWired)
	}
}

func (r *backendRun) readyOrSkip() {
	r.wiredOrSkip()
}

func (r *backendRun) afterReady() {
	r.readyOrSkip()
	if !r.ready {
		Skip("the claim never became Ready (see the first spec)")
	}
}

func (r *backendRun) becomesReady(ctx SpecContext) {
	r.readyOrSkip()
	// With a real data plane (a real guest, a real node) Ready means squid
	// serves: this phase is the backend's boot-to-Ready time.
	timed(string(r.bc.backend)+": claim created -> Ready (boot to Ready)", func() {
		Expect(env.c.Client.Create(ctx, r.claim)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			r.last = composedOf(ctx, g, r.claim)
			if m := cond(r.last.mr, "Synced"); strings.Contains(m, msgNotBuiltIn) {
				r.notWired = m
				return
			}
			g.Expect(r.last.mr.GetNamespace()).To(Equal(r.ns), "the managed resource lives in the claim's namespace")
			g.Expect(r.last.mr.GroupVersionKind()).To(Equal(cluster.ManagedGVK(r.bc.backend)))
			g.Expect(cond(r.last.mr, "Ready")).To(HavePrefix("True"), "managed resource %s", r.last.mr.GetName())
			g.Expect(cond(r.last.xr, "Ready")).To(HavePrefix("True"), "XR %s", r.last.xr.GetName())
			c := get(ctx, g, cluster.ClaimGVK(), r.ns, r.name)
			g.Expect(cond(c, "Ready")).To(HavePrefix("True"), "claim")
			g.Expect(cond(c, "Synced")).To(HavePrefix("True"), "claim")
		}).WithTimeout(r.bc.timeout()).WithPolling(poll).Should(Succeed())
	})
	r.wiredOrSkip()
	r.ready = true
}

func (r *backendRun) showsStatus(ctx SpecContext) {
	r.afterReady()
	Eventually(ctx, func(g Gomega) {
		c := get(ctx, g, cluster.ClaimGVK(), r.ns, r.name)
		r.last = composedOf(ctx, g, r.claim)
		g.Expect(str(c, "status", "endpoint")).NotTo(BeEmpty())
		g.Expect(str(c, "status", "endpoint")).To(Equal(str(r.last.mr, "status", "atProvider", "endpoint")))
		g.Expect(str(c, "status", "egressIP")).To(r.bc.egressIP)
		g.Expect(str(c, "status", "backend")).To(Equal(string(r.bc.backend)))
	}).WithTimeout(changeTimeout).WithPolling(poll).Should(Succeed())
}

func (r *backendRun) writesSecret(ctx SpecContext) {
	r.afterReady()
	Eventually(ctx, func(g Gomega) {
		xr := get(ctx, g, cluster.CompositeGVK(), "", r.last.xr.GetName())
		g.Expect(str(xr, "spec", "writeConnectionSecretToRef", "name")).NotTo(BeEmpty(),
			"the XR has no writeConnectionSecretToRef, so Crossplane writes no connection Secret for the claim: "+
				"its Composition (%s) must set spec.writeConnectionSecretsToNamespace", str(xr, "spec", "compositionRef", "name"))
		s := &corev1.Secret{}
		g.Expect(env.c.Client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: r.name + "-proxy"}, s)).To(Succeed())
		g.Expect(s.Data).To(SatisfyAll(HaveKey("endpoint"), HaveKey("port"), HaveKey("username"), HaveKey("password"), HaveKey("url")))
		g.Expect(s.Data["username"]).NotTo(BeEmpty())
		g.Expect(len(s.Data["password"])).To(BeNumerically(">=", 16), "a generated password is long")
		u, err := url.Parse(string(s.Data["url"]))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(u.Scheme).To(Equal("http"))
		g.Expect(u.Host).To(Equal(string(s.Data["endpoint"])))
		g.Expect(u.Port()).To(Equal(string(s.Data["port"])))
		g.Expect(u.User.Username()).To(Equal(string(s.Data["username"])))
		pw, _ := u.User.Password()
		g.Expect(pw).To(Equal(string(s.Data["password"])))
	}).WithTimeout(changeTimeout).WithPolling(poll).Should(Succeed())
}

// carriesRotation annotates the claim as an app team does to rotate a
// generated password: Crossplane copies the annotation to the XR, the
// function puts it on the managed resource.
func (r *backendRun) carriesRotation(ctx SpecContext) {
	r.afterReady()
	const rotation = "e2e-claim-1"
	annotate(ctx, get(ctx, Default, cluster.ClaimGVK(), r.ns, r.name), commonv1alpha1.AnnotationKeyCredentialsRotation, rotation)
	Eventually(ctx, func(g Gomega) {
		r.last = composedOf(ctx, g, r.claim)
		g.Expect(r.last.mr.GetAnnotations()).To(HaveKeyWithValue(commonv1alpha1.AnnotationKeyCredentialsRotation, rotation))
		g.Expect(cond(r.last.mr, "Ready")).To(HavePrefix("True"), "managed resource %s", r.last.mr.GetName())
	}).WithTimeout(changeTimeout).WithPolling(poll).Should(Succeed())
}

func (r *backendRun) changesAllowlist(ctx SpecContext) {
	r.afterReady()
	before := str(r.last.mr, "status", "atProvider", "configChecksum")
	Expect(before).NotTo(BeEmpty(), "the managed resource reports a configChecksum")
	timed(string(r.bc.backend)+": allowlist change -> new configChecksum", func() {
		c := get(ctx, Default, cluster.ClaimGVK(), r.ns, r.name)
		p := client.MergeFrom(c.DeepCopy())
		dests, added := []string{"api.example.com", ".example.org", "downloads.example.net"}, "downloads.example.net"
		if r.traffic != nil {
			// Remove the allowed origin, allow the other one, and rotate
			// the password with it.
			added = traffic.OtherOrigin + "/32"
			dests = []string{added, r.traffic.tc.privateOrigin() + "/32"}
			r.rotatePassword(ctx)
		}
		Expect(unstructured.SetNestedStringSlice(c.Object, dests, "spec", "allowedDestinations")).To(Succeed())
		Expect(env.c.Client.Patch(ctx, c, p)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			r.last = composedOf(ctx, g, r.claim)
			got, _, _ := unstructured.NestedStringSlice(r.last.mr.Object, "spec", "forProvider", "allowedDestinations")
			g.Expect(got).To(ContainElement(added), "the managed resource has the new allowlist")
			g.Expect(str(r.last.mr, "status", "atProvider", "configChecksum")).NotTo(Or(BeEmpty(), Equal(before)), "the backend runs the new configuration")
			g.Expect(cond(r.last.mr, "Ready")).To(HavePrefix("True"))
			// readyTimeout: a backend that replaces its instance on a change
			// (gcp) deletes it and creates the new one once Observe finds
			// it gone, after the reconciler's backoff; kvm boots a new
			// guest.
		}).WithTimeout(r.bc.timeout()).WithPolling(poll).Should(Succeed())
	})
}

// deletes deletes the claim and reports when each part was gone.
func (r *backendRun) deletes(ctx SpecContext) {
	r.afterReady()
	timed(string(r.bc.backend)+": claim deleted -> backend empty", func() {
		Expect(env.c.Client.Delete(ctx, r.claim)).To(Succeed())
		t0, seen := time.Now(), map[string]time.Duration{}
		mark := func(what string, ok bool) bool {
			if _, done := seen[what]; ok && !done {
				seen[what] = time.Since(t0).Round(10 * time.Millisecond)
			}
			return ok
		}
		Eventually(ctx, func(g Gomega) {
			g.Expect(mark("claim", gone(ctx, cluster.ClaimGVK(), r.ns, r.name))).To(BeTrue(), "claim")
			g.Expect(mark("XR", gone(ctx, cluster.CompositeGVK(), "", r.last.xr.GetName()))).To(BeTrue(), "XR")
			g.Expect(mark("MR", gone(ctx, r.last.mrGVK, r.last.mr.GetNamespace(), r.last.mr.GetName()))).To(BeTrue(), "managed resource")
			r.bc.backendGone(ctx, g, r.last.mr)
		}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())
		AddReportEntry("gone after", fmt.Sprint(seen))
	})
}

// failingBackend creates a claim whose backend fails and checks that the
// cause shows on its managed resource and in crossplane beta trace -o json,
// at the managed resource, with the claim not Ready.
func failingBackend(ctx context.Context, bc backendCase, ns string) {
	labels := bc.failure.setup(ctx)
	claim := newClaim(ns, "e2e-"+string(bc.backend)+"-broken", labels)
	DeferCleanup(func(ctx SpecContext) { deleteAndWait(ctx, claim) })
	// Cleanups run last in, first out: the failure is undone before the
	// claim is deleted, so that its managed resource can delete what it
	// holds (the provider must reach the backend to delete it).
	if bc.failure.cleanup != nil {
		DeferCleanup(bc.failure.cleanup)
	}
	timed(string(bc.backend)+": failure visible on the claim and in trace", func() {
		Expect(env.c.Client.Create(ctx, claim)).To(Succeed())
		var mrName string
		Eventually(ctx, func(g Gomega) {
			cp := composedOf(ctx, g, claim)
			mrName = cp.mr.GetName()
			g.Expect(cond(cp.mr, "Synced") + " | " + cond(cp.mr, "Ready")).To(bc.failure.message)
			c := get(ctx, g, cluster.ClaimGVK(), ns, claim.GetName())
			g.Expect(cond(c, "Ready")).NotTo(HavePrefix("True"), "the claim is not Ready")
		}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())
		Eventually(ctx, func(g Gomega) {
			t, err := traceJSON(ctx, ns, claim.GetName())
			g.Expect(err).NotTo(HaveOccurred())
			bad := t.unhealthy()
			g.Expect(bad).NotTo(BeEmpty())
			cause := bad[len(bad)-1]
			g.Expect(cause.Kind).To(Equal(cluster.ManagedGVK(bc.backend).Kind), "trace points at the managed resource: %v", bad)
			g.Expect(cause.Name).To(Equal(mrName))
			g.Expect(cause.Synced + " | " + cause.Ready).To(bc.failure.message)
			AddReportEntry("trace of the failing claim", fmt.Sprint(bad))
		}).WithTimeout(changeTimeout).WithPolling(time.Second).Should(Succeed())
	})
}
