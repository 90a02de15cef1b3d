/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	ggcrname "github.com/google/go-containerregistry/pkg/name"
	ggcr "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/node"
)

// The node's containerd pulls from a private registry over TLS as a user
// configures it (certs.d/HOST/hosts.toml naming the CA), and refuses a
// registry whose CA it was not told to trust.
var _ = Describe("The node's containerd", Label("kubernetes", "registry"), func() {
	BeforeEach(func() {
		if env.c.Node == nil {
			if testenv.InCI() {
				Fail("CI=true but no real node runs here: " + env.c.NoRealNode)
			}
			Skip("no real node here: " + env.c.NoRealNode)
		}
	})

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

// privateRegistry starts a registry on the host's loopback with a serving
// certificate for 127.0.0.1 and BridgeIP signed by a new CA, exposes it
// inside the node's network namespace, and pushes the node's pause image.
func privateRegistry() registry {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e registry CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	Expect(err).NotTo(HaveOccurred())
	ca, err := x509.ParseCertificate(caDER)
	Expect(err).NotTo(HaveOccurred())
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "e2e registry"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(node.BridgeIP)},
	}, ca, &key.PublicKey, caKey)
	Expect(err).NotTo(HaveOccurred())

	srv := httptest.NewUnstartedServer(ggcr.New(ggcr.Logger(log.New(io.Discard, "", 0))))
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	DeferCleanup(srv.Close)
	hostAddr := strings.TrimPrefix(srv.URL, "https://")
	host, err := env.c.Node.Expose(hostAddr)
	Expect(err).NotTo(HaveOccurred())

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	dir, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "squid-image.sh"), "path").Output()
	Expect(err).NotTo(HaveOccurred(), "the node's images (hack/squid-image.sh)")
	img, err := tarball.ImageFromPath(filepath.Join(strings.TrimSpace(string(dir)), "pause.tar"), nil)
	Expect(err).NotTo(HaveOccurred())
	ref, err := ggcrname.ParseReference(hostAddr + "/e2e/pause:v1")
	Expect(err).NotTo(HaveOccurred())
	Expect(remote.Write(ref, img, remote.WithTransport(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}))).To(Succeed())

	caFile := filepath.Join(GinkgoT().TempDir(), "ca.crt")
	Expect(os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644)).To(Succeed()) //nolint:gosec // A CA certificate.
	return registry{host: host, caFile: caFile}
}
