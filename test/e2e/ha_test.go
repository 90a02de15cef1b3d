/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best dot-imported.
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

// The high availability specs (issue 39): the provider runs as
// examples/runtime/ha.yaml runs it, two replicas electing a leader through
// a Lease, and its leader dies while claims are being created. Nothing
// here asserts a time but the one the issue asks for, a takeover within
// the lease time; the times are printed.
const (
	haNamespace = "team-ha"
	// haClaims are created per kill: half before it, half right after, in
	// the gap without a leader. Kubernetes proxies: each is a squid pod on
	// the real node, ready in seconds (a guest would boot for minutes).
	haClaims = 4
	// haRetry is the longest wait between two looks of a replica at the
	// Lease: client-go retries every RetryPeriod (controller-runtime's
	// default, 2 s; cmd/provider sets none) with a jitter of up to 1.2
	// times it. A replica that sees the Lease expire in its own clock
	// (leaseDurationSeconds after it last saw a renewal, which came up to
	// one look after the leader's last renewal) takes it at its next look:
	// the lease time, as client-go keeps it, is leaseDurationSeconds plus
	// two looks (haLooks). One more look's worth bounds the API calls'
	// latency on a loaded machine (measured: 64-65 s of 68.8 s).
	haRetry = 2 * time.Second * 22 / 10
	haLooks = 3
)

var _ = Describe("the provider with two replicas and leader election (examples/runtime/ha.yaml)", Ordered, Serial, Label("ha"), func() {
	BeforeAll(func(ctx SpecContext) {
		skipUnless(cluster.BackendKubernetes)
		ensureNamespace(ctx, haNamespace)
		timed("ha: the running provider switched to examples/runtime/ha.yaml", func() {
			Expect(env.c.SetProviderRuntime(ctx, cluster.RuntimeHA)).To(Succeed())
		})
		// The other specs run one replica as
		// examples/runtime/provider-egressproxy.yaml does.
		DeferCleanup(func(ctx SpecContext) {
			timed("ha: back to examples/runtime/provider-egressproxy.yaml", func() {
				Expect(env.c.SetProviderRuntime(ctx, cluster.RuntimeDefault)).To(Succeed())
			})
		})
	}, NodeTimeout(5*time.Minute))

	It("runs two ready replicas, one of them holding the Lease, with a read-only root file system", func(ctx SpecContext) {
		lease, leader, pods := haElected(ctx)
		for _, p := range pods {
			ct := p.Spec.Containers[0]
			Expect(ct.SecurityContext).NotTo(BeNil(), "pod %s", p.Name)
			Expect(ct.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()), "pod %s", p.Name)
			Expect(ct.Env).To(ContainElement(corev1.EnvVar{Name: "LEADER_ELECTION", Value: "true"}), "pod %s", p.Name)
		}
		msg := fmt.Sprintf("Lease %s/%s: holder %s (pod %s), leaseDurationSeconds %d, transitions %d",
			lease.Namespace, lease.Name, *lease.Spec.HolderIdentity, leader.Name, *lease.Spec.LeaseDurationSeconds, ptrInt(lease.Spec.LeaseTransitions))
		GinkgoWriter.Println(msg)
		AddReportEntry("ha: lease", msg)
	})

	It("takes over when the leader's pod is deleted during creates: another replica holds the Lease within the lease time, "+
		"every claim Ready, one instance each (takeover time printed)", func(ctx SpecContext) {
		haTakeover(ctx, "pod-deleted", func(ctx context.Context, leader *corev1.Pod) {
			Expect(env.c.Client.Delete(ctx, leader)).To(Succeed())
		})
	})

	It("takes over when the node's containerd SIGKILLs the leader's container during creates: another replica holds the Lease "+
		"within the lease time, every claim Ready, one instance each (takeover time printed)", func(ctx SpecContext) {
		haTakeover(ctx, "container-killed", func(ctx context.Context, leader *corev1.Pod) {
			id := ""
			for _, s := range leader.Status.ContainerStatuses {
				if s.Name == leader.Spec.Containers[0].Name {
					id = s.ContainerID
				}
			}
			Expect(id).NotTo(BeEmpty(), "the container ID of pod %s", leader.Name)
			Expect(env.c.Node.KillContainer(id)).To(Succeed())
		})
	})
})

// haElected waits until the provider runs two ready replicas of its
// revision and one of them holds the Lease, and returns them.
func haElected(ctx context.Context) (*coordinationv1.Lease, *corev1.Pod, []corev1.Pod) {
	var lease *coordinationv1.Lease
	var leader *corev1.Pod
	var ready []corev1.Pod
	Eventually(ctx, func(g Gomega) {
		pods, err := env.c.ProviderPods(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		ready = ready[:0]
		for _, p := range pods {
			if p.DeletionTimestamp == nil && podIsReady(&p) {
				ready = append(ready, p)
			}
		}
		g.Expect(ready).To(HaveLen(2), "ready replicas of %s (of %d pods)", env.c.ProviderRevisionName, len(pods))
		lease, leader, err = env.c.ProviderLeader(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lease).NotTo(BeNil(), "the Lease %s", cluster.ProviderLease)
		g.Expect(leader).NotTo(BeNil(), "a ready replica holds the Lease (holder %q)", cluster.HolderPod(lease))
	}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())
	return lease, leader, ready
}

// haTakeover creates haClaims claims on the kubernetes backend, half of
// them before kill ends the leader (once it has made an instance, so that
// it dies while creating), half right after, and asserts that another
// replica holds the Lease within the lease time, that every claim becomes
// Ready, and that each has exactly one instance on the backend.
func haTakeover(ctx SpecContext, what string, kill func(ctx context.Context, leader *corev1.Pod)) {
	lease, leader, replicas := haElected(ctx)
	oldID := *lease.Spec.HolderIdentity
	leaseTime := time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	claims := make([]*unstructured.Unstructured, 0, haClaims)
	for i := range haClaims {
		claims = append(claims, newClaim(haNamespace, fmt.Sprintf("ha-%s-%d", what, i), map[string]string{LabelBackend: string(cluster.BackendKubernetes)}))
	}
	DeferCleanup(func(ctx SpecContext) { haDelete(ctx, claims) })

	for _, c := range claims[:haClaims/2] {
		Expect(env.c.Client.Create(ctx, c)).To(Succeed())
	}
	// The leader is creating: it has made an instance of a claim.
	Eventually(ctx, func(g Gomega) {
		g.Expect(haInstances(ctx, g)).NotTo(BeEmpty())
	}).WithTimeout(readyTimeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	before := len(haInstances(ctx, Default))

	t0 := time.Now()
	kill(ctx, leader)
	for _, c := range claims[haClaims/2:] {
		Expect(env.c.Client.Create(ctx, c)).To(Succeed())
	}
	var took, acquired time.Duration
	var holder string
	Eventually(ctx, func(g Gomega) {
		l, _, err := env.c.ProviderLeader(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		id := ""
		if l != nil && l.Spec.HolderIdentity != nil {
			id = *l.Spec.HolderIdentity
		}
		g.Expect(id).NotTo(Or(BeEmpty(), Equal(oldID)), "a new holder of the Lease")
		took, holder = time.Since(t0), id
		if a := l.Spec.AcquireTime; a != nil {
			acquired = a.Sub(t0)
		}
	}).WithTimeout(leaseTime + haLooks*haRetry + time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	// Who took over: the replica that waited (the case), or a
	// process that started after the kill: the leader pod's restarted
	// container (a new identity), or the pod the Deployment made anew.
	replica := "a new pod of the Deployment"
	for _, p := range replicas {
		if pod, _, _ := strings.Cut(holder, "_"); pod == p.Name {
			replica = "the other replica"
			if pod == leader.Name {
				replica = "the restarted container of the leader's pod"
			}
		}
	}

	Eventually(ctx, func(g Gomega) {
		for _, c := range claims {
			u := get(ctx, g, cluster.ClaimGVK(), c.GetNamespace(), c.GetName())
			g.Expect(cond(u, "Ready")).To(HavePrefix("True"), "claim %s", c.GetName())
			g.Expect(cond(u, "Synced")).To(HavePrefix("True"), "claim %s", c.GetName())
		}
	}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())
	allReady := time.Since(t0)

	// One instance per claim: its Deployment and Service, named after the
	// managed resource's external name, and nothing else of this
	// namespace's claims on the backend.
	for _, c := range claims {
		mr := composedOf(ctx, Default, c).mr
		for kind, l := range map[string]client.ObjectList{"Deployments": &appsv1.DeploymentList{}, "Services": &corev1.ServiceList{}} {
			Expect(env.c.Client.List(ctx, l, client.InNamespace(cluster.ProxyNamespace),
				client.MatchingLabels{backend.KubernetesLabelKeys.OwnerUID: string(mr.GetUID())})).To(Succeed())
			Expect(meta.LenList(l)).To(Equal(1), "%s of claim %s (managed resource %s)", kind, c.GetName(), mr.GetName())
			o, err := meta.ExtractList(l)
			Expect(err).NotTo(HaveOccurred())
			name := o[0].(client.Object).GetName()
			Expect(name).To(Equal(mr.GetAnnotations()["crossplane.io/external-name"]), "%s of claim %s", kind, c.GetName())
		}
	}
	Expect(haInstances(ctx, Default)).To(HaveLen(haClaims), "Deployments of %s's proxies", haNamespace)

	msg := fmt.Sprintf("%s: leader %s (pod %s) -> %s (%s): takeover %s after the kill (Lease acquireTime %s), every claim Ready %s after; "+
		"%d of %d instances made before the kill, %d claims created after it; leaseDurationSeconds %d",
		what, oldID, leader.Name, holder, replica, took.Round(10*time.Millisecond), acquired.Round(10*time.Millisecond),
		allReady.Round(10*time.Millisecond), before, haClaims/2, haClaims-haClaims/2, *lease.Spec.LeaseDurationSeconds)
	GinkgoWriter.Println(msg)
	AddReportEntry("ha: takeover, "+what, msg)
	env.phases = append(env.phases, phase{name: "ha: takeover, " + what, d: took}, phase{name: "ha: every claim Ready, " + what, d: allReady})
	Expect(took).To(BeNumerically("<=", leaseTime+haLooks*haRetry), "takeover within the lease time (%s and %d looks of %s)", leaseTime, haLooks, haRetry)
}

// haInstances returns the names of the Deployments the kubernetes backend
// made for the claims of haNamespace (their ownership labels name the
// managed resources' namespace).
func haInstances(ctx context.Context, g Gomega) []string {
	l := &appsv1.DeploymentList{}
	g.Expect(env.c.Client.List(ctx, l, client.InNamespace(cluster.ProxyNamespace), client.MatchingLabels{
		backend.KubernetesLabelKeys.ManagedBy:      backend.ManagedByValue,
		backend.KubernetesLabelKeys.OwnerNamespace: haNamespace,
	})).To(Succeed())
	out := make([]string, 0, len(l.Items))
	for _, d := range l.Items {
		out = append(out, d.Name)
	}
	return out
}

// haDelete deletes the claims and waits until nothing of them is left on
// the backend.
func haDelete(ctx context.Context, claims []*unstructured.Unstructured) {
	var mrs []*unstructured.Unstructured
	for _, c := range claims {
		// A claim a failed spec left uncomposed has nothing on the backend.
		_ = InterceptGomegaFailure(func() { mrs = append(mrs, composedOf(ctx, Default, c).mr) })
	}
	for _, c := range claims {
		deleteAndWait(ctx, c)
	}
	Eventually(ctx, func(g Gomega) {
		for _, mr := range mrs {
			if str(mr, "status", "atProvider", "instanceID") != "" {
				kubernetesGone(ctx, g, mr)
			}
		}
		g.Expect(haInstances(ctx, g)).To(BeEmpty())
	}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func ptrInt(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
