/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/node"
)

// The control plane serves pods as a real cluster's does: the apiserver
// runs where the pods are, with a serving certificate for the names
// in-cluster clients dial, it is the kubernetes Service's endpoint, and a
// pod gets a ServiceAccount token the apiserver accepts.
var _ = Describe("The control plane", Label("kubernetes", "controlplane"), func() {
	const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

	BeforeEach(skipWithoutNode)

	It("is reached from the pod network at the kubernetes Service's names, with the cluster's CA", func(ctx SpecContext) {
		addr := net.JoinHostPort(node.BridgeIP, strconv.Itoa(node.APIServerPort))
		// kube-apiserver serves kubernetes.default.svc on the node's
		// address; a pod's client verifies exactly that name.
		c := inClusterClient(ctx, "kubernetes.default.svc")
		rsp := callFromNode(ctx, c, http.MethodGet, "https://"+addr+"/readyz", "", "")
		Expect(rsp).To(Equal("200 ok"))

		// The lease endpoint reconciler publishes that address for the
		// kubernetes Service, which in-cluster config dials.
		Eventually(ctx, func(g Gomega) {
			l := &discoveryv1.EndpointSliceList{}
			g.Expect(env.c.Client.List(ctx, l, client.InNamespace("default"), client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"})).To(Succeed())
			var got []string
			for _, s := range l.Items {
				for _, e := range s.Endpoints {
					for _, p := range s.Ports {
						got = append(got, net.JoinHostPort(e.Addresses[0], strconv.Itoa(int(ptr.Deref(p.Port, 0)))))
					}
				}
			}
			g.Expect(got).To(ConsistOf(addr))
		}).WithTimeout(30 * time.Second).WithPolling(poll).Should(Succeed())
	})

	It("mounts a ServiceAccount token into a pod, and accepts that ServiceAccount's tokens", func(ctx SpecContext) {
		ns := "controlplane-e2e"
		ensureNamespace(ctx, ns)
		// The ServiceAccount admission plugin adds the token volume; the
		// kubelet mounts it with the kubernetes Service's CA. The pod
		// exits 0 only if all three files are there.
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sa-token"},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "check", Image: env.c.SquidImage, ImagePullPolicy: corev1.PullNever,
					Command: []string{"/bin/sh", "-c", fmt.Sprintf(`test -s %[1]s/token && test -s %[1]s/ca.crt && test "$(cat %[1]s/namespace)" = %[2]s`, saDir, ns)},
				}},
			},
		}
		// The ServiceAccount controller makes "default" shortly after the
		// namespace; until then the admission refuses the pod.
		Eventually(ctx, func() error { return client.IgnoreAlreadyExists(env.c.Client.Create(ctx, pod)) }).
			WithTimeout(30 * time.Second).WithPolling(poll).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = env.c.Client.Delete(ctx, pod) })
		Expect(env.c.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		Expect(pod.Spec.ServiceAccountName).To(Equal("default"))
		Expect(pod.Spec.Containers[0].VolumeMounts).To(ContainElement(HaveField("MountPath", saDir)),
			"the ServiceAccount admission plugin adds the token volume")
		Eventually(ctx, func(g Gomega) {
			g.Expect(env.c.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded), "pod status: %+v", pod.Status.ContainerStatuses)
		}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())

		// A token of the pod's ServiceAccount authenticates it to the
		// apiserver, as in-cluster config sends it.
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}
		tr := &authenticationv1.TokenRequest{}
		Expect(env.c.Client.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
		c := inClusterClient(ctx, "kubernetes.default.svc")
		addr := net.JoinHostPort(node.BridgeIP, strconv.Itoa(node.APIServerPort))
		who := callFromNode(ctx, c, http.MethodPost, "https://"+addr+"/apis/authentication.k8s.io/v1/selfsubjectreviews", tr.Status.Token,
			`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
		Expect(who).To(And(HavePrefix("201"), ContainSubstring(`"username":"system:serviceaccount:`+ns+`:default"`)))
		Expect(callFromNode(ctx, c, http.MethodGet, "https://"+addr+"/api", "not-a-token", "")).To(HavePrefix("401"))
	})
})

// inClusterClient returns an HTTP client that dials from the node's network
// namespace, trusts only the cluster's CA, and verifies serverName.
func inClusterClient(_ context.Context, serverName string) *http.Client {
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM(env.c.Node.ControlPlane.CA)).To(BeTrue())
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext:     env.c.Node.DialContext,
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12},
	}}
}

// callFromNode sends a request with an optional bearer token and JSON body
// and returns "CODE body".
func callFromNode(ctx context.Context, c *http.Client, method, url, token, body string) string {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rsp, err := c.Do(req)
	Expect(err).NotTo(HaveOccurred(), "%s %s from the node's network namespace", method, url)
	defer rsp.Body.Close() //nolint:errcheck // Read-only.
	b, _ := io.ReadAll(rsp.Body)
	return fmt.Sprintf("%d %s", rsp.StatusCode, b)
}
