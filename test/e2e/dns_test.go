/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

// Pods find Services as on any cluster: the kubelet gives them the cluster
// DNS (CoreDNS, a pod itself) and kube-proxy carries their connections to a
// Service's cluster IP; nothing outside the cluster resolves.
var _ = Describe("Cluster DNS and Services", Label("kubernetes", "dns"), func() {
	BeforeEach(skipWithoutNode)

	It("resolves a Service's name in a pod, reaches it through kube-proxy, and forwards no lookup", func(ctx SpecContext) {
		svc := &corev1.Service{}
		Expect(env.c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, svc)).To(Succeed())
		ns := "dns-e2e"
		ensureNamespace(ctx, ns)
		// The squid image is Debian's minbase: sh, grep, getent (glibc's
		// resolver, as most programs use it) and bash's /dev/tcp. The pod
		// exits 0 only if every check passes; otherwise its last line
		// says which failed.
		script := `set -u
fail() { echo "$*" >&2; exit 1; }
grep -q "^nameserver ` + cluster.ClusterDNS + `$" /etc/resolv.conf || fail "resolv.conf: $(cat /etc/resolv.conf)"
[ "$(grep -c '^nameserver' /etc/resolv.conf)" = 1 ] || fail "more than the cluster DNS: $(cat /etc/resolv.conf)"
ip=$(getent hosts kubernetes.default | awk '{print $1}')
[ "$ip" = "$KUBERNETES_IP" ] || fail "kubernetes.default resolved to '$ip', not $KUBERNETES_IP"
if getent hosts example.com; then fail "example.com resolved: the cluster DNS forwarded it"; fi
timeout 10 bash -c 'exec 3<>/dev/tcp/kubernetes.default.svc/443' || fail "cannot connect to kubernetes.default.svc:443"
`
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lookup"},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "lookup", Image: env.c.SquidImage, ImagePullPolicy: corev1.PullNever,
					Command:                  []string{"/bin/sh", "-c", script},
					Env:                      []corev1.EnvVar{{Name: "KUBERNETES_IP", Value: svc.Spec.ClusterIP}},
					TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				}},
			},
		}
		// The ServiceAccount controller makes "default" shortly after the
		// namespace; until then the admission refuses the pod.
		Eventually(ctx, func() error { return client.IgnoreAlreadyExists(env.c.Client.Create(ctx, pod)) }).
			WithTimeout(30 * time.Second).WithPolling(poll).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = env.c.Client.Delete(ctx, pod) })
		Eventually(ctx, func(g Gomega) {
			g.Expect(env.c.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			if pod.Status.Phase == corev1.PodFailed {
				StopTrying("the pod's checks failed: " + terminationMessage(pod)).Now()
			}
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded))
		}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())
	})
})

// terminationMessage is the message of a pod's first terminated container.
func terminationMessage(pod *corev1.Pod) string {
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Terminated != nil {
			return s.State.Terminated.Message
		}
	}
	return ""
}
