/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	ggcrname "github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/node"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/ociregistry"
)

// The node's containerd pulls from a private registry over TLS as a user
// configures it (certs.d/HOST/hosts.toml naming the CA), and refuses a
// registry whose CA it was not told to trust.
var _ = Describe("The node's containerd", Label("kubernetes", "registry"), func() {
	BeforeEach(skipWithoutNode)

	It("pulls from a registry whose CA it trusts through certs.d, and from no other", func(ctx SpecContext) {
		ns := "registry-e2e"
		ensureNamespace(ctx, ns)
		trusted, untrusted := privateRegistry(), privateRegistry()
		Expect(env.c.Node.TrustRegistry(trusted.host, trusted.caFile)).To(Succeed())

		run := func(name, host string) *corev1.Pod {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "pause", Image: host + "/e2e/pause:v1", ImagePullPolicy: corev1.PullAlways,
				}}},
			}
			Eventually(ctx, func() error { return client.IgnoreAlreadyExists(env.c.Client.Create(ctx, pod)) }).
				WithTimeout(30 * time.Second).WithPolling(poll).Should(Succeed())
			DeferCleanup(func(ctx SpecContext) { _ = env.c.Client.Delete(ctx, pod) })
			return pod
		}
		ok, refused := run("trusted", trusted.host), run("untrusted", untrusted.host)
		Eventually(ctx, func(g Gomega) {
			g.Expect(env.c.Client.Get(ctx, client.ObjectKeyFromObject(ok), ok)).To(Succeed())
			g.Expect(ok.Status.Phase).To(Equal(corev1.PodRunning), "%+v", ok.Status.ContainerStatuses)
		}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())
		Eventually(ctx, func(g Gomega) {
			g.Expect(env.c.Client.Get(ctx, client.ObjectKeyFromObject(refused), refused)).To(Succeed())
			g.Expect(refused.Status.ContainerStatuses).To(ContainElement(HaveField("State.Waiting.Message",
				ContainSubstring("certificate signed by unknown authority"))))
		}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())
	})
})

// A registry is an OCI registry with a CA of its own, reachable from the
// node's pods at host (BridgeIP:port), holding e2e/pause:v1.
type registry struct {
	host, caFile string
}

// privateRegistry starts a registry (package ociregistry: a CA of its
// own, a serving certificate for loopback and BridgeIP) on the host's
// loopback, exposes it inside the node's network namespace, and pushes the
// node's pause image.
func privateRegistry() registry {
	reg, err := ociregistry.New(ociregistry.Options{Dir: GinkgoT().TempDir(), IPs: []net.IP{net.ParseIP(node.BridgeIP)}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(reg.Close)
	host, err := env.c.Node.Expose(reg.Host)
	Expect(err).NotTo(HaveOccurred())

	dir, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "squid-image.sh"), "path").Output()
	Expect(err).NotTo(HaveOccurred(), "the node's images (hack/squid-image.sh)")
	img, err := tarball.ImageFromPath(filepath.Join(strings.TrimSpace(string(dir)), "pause.tar"), nil)
	Expect(err).NotTo(HaveOccurred())
	ref, err := ggcrname.ParseReference(reg.Host + "/e2e/pause:v1")
	Expect(err).NotTo(HaveOccurred())
	Expect(remote.Write(ref, img, remote.WithTransport(reg.Transport()))).To(Succeed())
	return registry{host: host, caFile: reg.CAFile}
}
