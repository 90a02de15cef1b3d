/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/dialer"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/dialer/dialertest"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

// healthTimeout bounds waiting for a config's Healthy condition. The
// provider checks every config at start and then every --health-interval
// (one minute by default), each check bounded by 30 seconds: a config made
// after the start is seen at the next tick.
const healthTimeout = 2*time.Minute + 30*time.Second

// Names of the broken ClusterProviderConfigs; their Secrets, in
// cluster.CrossplaneNamespace, are named <backend>-<config>.
const (
	healthBadCredentials = "health-e2e-bad-credentials"
	healthUnreachable    = "health-e2e-unreachable"
)

// Reasons of the Healthy condition: the error class of the check.
const (
	reasonPermanent = "PermanentError"
	reasonTransient = "TransientError"
	reasonNotFound  = "NotFound"
)

// A brokenConfig is a ClusterProviderConfig that must report Healthy=False.
type brokenConfig struct {
	// what is wrong with it, for failure messages.
	what   string
	secret *corev1.Secret
	config *unstructured.Unstructured
	// reason and message of its Healthy condition: the error class, and
	// what the backend said.
	reason  string
	message OmegaMatcher
}

// A healthCase is one backend's working and broken configs.
type healthCase struct {
	backend cluster.Backend
	group   string
	// broken returns the configs to break, once the backend is set up.
	broken func(ctx context.Context) []brokenConfig
}

// healthCases are the backends' health cases, each registered from the
// backend's own file: var _ = registerHealth(healthCase{...}).
var healthCases []healthCase

func registerHealth(hc healthCase) bool {
	healthCases = append(healthCases, hc)
	return true
}

// ContinueOnFailure: one backend's failure must not hide the others'.
var _ = Describe("Health of provider configs", Ordered, ContinueOnFailure, func() {
	made := map[cluster.Backend][]brokenConfig{}

	// All broken configs are made at once, so one health check tick sees
	// them all.
	BeforeAll(func(ctx SpecContext) {
		for _, hc := range healthCases {
			if !available(hc.backend) {
				continue
			}
			for _, b := range hc.broken(ctx) {
				if b.secret != nil {
					Expect(env.c.Client.Create(ctx, b.secret)).To(Succeed(), "Secret of the config with %s", b.what)
				}
				Expect(env.c.Client.Create(ctx, b.config)).To(Succeed(), "config with %s", b.what)
				DeferCleanup(func(ctx context.Context) {
					deleteAndWait(ctx, b.config)
					if b.secret != nil {
						Expect(client.IgnoreNotFound(env.c.Client.Delete(ctx, b.secret))).To(Succeed())
					}
				})
				made[hc.backend] = append(made[hc.backend], b)
			}
		}
	})

	for _, hc := range healthCases {
		It(fmt.Sprintf("shows the %s backend's working config Healthy and its broken ones not, with the cause", hc.backend), func(ctx SpecContext) {
			skipUnless(hc.backend)
			gvk := schema.GroupVersionKind{Group: hc.group, Version: "v1alpha1", Kind: "ClusterProviderConfig"}
			want := map[string]string{cluster.ProviderConfigName: "True"}
			timed(string(hc.backend)+": the working config is Healthy", func() {
				Eventually(func(g Gomega) {
					u := get(ctx, g, gvk, "", cluster.ProviderConfigName)
					g.Expect(cond(u, "Healthy")).To(HavePrefix("True: Available"))
				}).WithContext(ctx).WithTimeout(healthTimeout).WithPolling(time.Second).Should(Succeed())
			})
			for _, b := range made[hc.backend] {
				timed(fmt.Sprintf("%s: the config with %s is not Healthy", hc.backend, b.what), func() {
					Eventually(func(g Gomega) {
						u := get(ctx, g, gvk, "", b.config.GetName())
						c, ok := cluster.Condition(u, "Healthy")
						g.Expect(ok).To(BeTrue(), "no Healthy condition yet")
						g.Expect(c["status"]).To(Equal("False"), cond(u, "Healthy"))
						g.Expect(c["reason"]).To(Equal(b.reason), cond(u, "Healthy"))
						g.Expect(c["message"]).To(b.message)
						GinkgoWriter.Printf("%s config with %s: Healthy=%s\n", hc.backend, b.what, cond(u, "Healthy"))
					}).WithContext(ctx).WithTimeout(healthTimeout).WithPolling(time.Second).Should(Succeed())
				})
				want[b.config.GetName()] = "False"
			}
			timed(string(hc.backend)+": kubectl get shows the HEALTHY column", func() {
				// Other specs may have configs of their own: only ours count.
				got := kubectlHealthy(ctx, "clusterproviderconfigs."+hc.group)
				for name, v := range want {
					Expect(got).To(HaveKeyWithValue(name, v), "HEALTHY of %s", name)
				}
			})
		})
	}
})

// available reports whether a backend is set up here, without skipping.
func available(b cluster.Backend) bool {
	_, skipped := env.skipped[b]
	_, missing := env.missing[b]
	return !skipped && !missing
}

// kubectlHealthy runs kubectl get on a provider config resource and returns
// the HEALTHY column of each row, by name, as an operator would read it.
func kubectlHealthy(ctx context.Context, resource string) map[string]string {
	Expect(env.c.Tools.Kubectl).NotTo(BeEmpty(), "kubectl is not built (hack/tools.sh build kubectl)")
	out, err := exec.CommandContext(ctx, env.c.Tools.Kubectl, "--kubeconfig", env.c.Kubeconfig, "get", resource).CombinedOutput() //nolint:gosec // The tool cache's kubectl.
	Expect(err).NotTo(HaveOccurred(), string(out))
	GinkgoWriter.Printf("kubectl get %s:\n%s", resource, out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	// Columns are aligned to the header; an empty cell (USERS of an unused
	// config) leaves no field, so read the cell at the header's offset.
	col := strings.Index(lines[0], "HEALTHY")
	Expect(col).To(BeNumerically(">", 0), "columns of kubectl get %s: %s", resource, lines[0])
	end := col + len("HEALTHY")
	for end < len(lines[0]) && lines[0][end] == ' ' {
		end++
	}
	got := map[string]string{}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 0 && len(l) > col {
			got[f[0]] = strings.TrimSpace(l[col:min(end, len(l))])
		}
	}
	return got
}

// deadLoopbackAddr returns 127.0.0.1:port where nothing listens.
func deadLoopbackAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	Expect(l.Close()).To(Succeed())
	return addr
}

// healthSecret returns the Secret of a broken config of backend b.
func healthSecret(b cluster.Backend, config string, data map[string][]byte) *corev1.Secret {
	name := string(b) + "-" + config
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.CrossplaneNamespace, Name: name}, Data: data}
}

// brokenKubernetesConfigs are a kubeconfig of this control plane with a
// token it does not know, and one whose server is a dead loopback port.
func brokenKubernetesConfigs(_ context.Context) []brokenConfig {
	kubeconfig := func(edit func(*clientcmdapi.Config)) []byte {
		c, err := clientcmd.LoadFromFile(env.c.InClusterKubeconfig)
		Expect(err).NotTo(HaveOccurred())
		edit(c)
		b, err := clientcmd.Write(*c)
		Expect(err).NotTo(HaveOccurred())
		return b
	}
	mk := func(name, what string, data []byte, reason string, msg OmegaMatcher) brokenConfig {
		pc := cluster.KubernetesProviderConfig("ClusterProviderConfig", "", name, cluster.CrossplaneNamespace)
		s := healthSecret(cluster.BackendKubernetes, name, map[string][]byte{"kubeconfig": data})
		Expect(unstructured.SetNestedField(pc.Object, s.Name, "spec", "credentials", "secretRef", "name")).To(Succeed())
		return brokenConfig{what: what, secret: s, config: pc, reason: reason, message: msg}
	}
	badToken := kubeconfig(func(c *clientcmdapi.Config) {
		for name := range c.AuthInfos {
			c.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "not-a-token-of-this-cluster"}
		}
	})
	dead := "https://" + deadLoopbackAddr()
	deadServer := kubeconfig(func(c *clientcmdapi.Config) {
		for _, cl := range c.Clusters {
			cl.Server = dead
		}
	})
	return []brokenConfig{
		mk(healthBadCredentials, "a token the cluster does not know", badToken, reasonPermanent,
			ContainSubstring("the target cluster rejected the provider config's credentials")),
		mk(healthUnreachable, "a server on a loopback port where nothing listens", deadServer, reasonTransient,
			And(ContainSubstring(strings.TrimPrefix(dead, "https://")), ContainSubstring("connection refused"))),
	}
}

// brokenGCPConfigs are a key the GCE fake's token endpoint never issued, a
// project the fake does not serve, and an endpoint on a dead loopback port.
func brokenGCPConfigs(ctx context.Context) []brokenConfig {
	s := &corev1.Secret{}
	Expect(env.c.Client.Get(ctx, client.ObjectKey{Namespace: cluster.CrossplaneNamespace, Name: cluster.GCPKeySecret}, s)).To(Succeed())
	key := map[string]any{}
	Expect(json.Unmarshal(s.Data["credentials.json"], &key)).To(Succeed())
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	Expect(err).NotTo(HaveOccurred())
	der, err := x509.MarshalPKCS8PrivateKey(rk)
	Expect(err).NotTo(HaveOccurred())
	key["private_key"] = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	forged, err := json.Marshal(key)
	Expect(err).NotTo(HaveOccurred())

	mk := func(name, what, endpoint, secret, reason string, msg OmegaMatcher) brokenConfig {
		pc := cluster.GCPProviderConfig("ClusterProviderConfig", "", name, endpoint)
		Expect(unstructured.SetNestedField(pc.Object, secret, "spec", "credentials", "secretRef", "name")).To(Succeed())
		return brokenConfig{what: what, config: pc, reason: reason, message: msg}
	}
	forgedSecret := healthSecret(cluster.BackendGCP, healthBadCredentials, map[string][]byte{"credentials.json": forged})
	// The token endpoint's OAuth error code, never its body (which says
	// "Invalid JWT Signature"): the body is the endpoint's to choose.
	bad := mk(healthBadCredentials, "a service account key the token endpoint refuses", env.c.GCE.PodURL, forgedSecret.Name, reasonPermanent,
		And(ContainSubstring("HTTP 400 invalid_grant"), Not(ContainSubstring("Invalid JWT Signature"))))
	bad.secret = forgedSecret
	noProject := mk("health-e2e-no-such-project", "a project that does not exist", env.c.GCE.PodURL, cluster.GCPKeySecret, reasonNotFound,
		And(ContainSubstring("projects/no-such-project-e2e"), MatchRegexp(`(?i)not.?found`)))
	Expect(unstructured.SetNestedField(noProject.config.Object, "no-such-project-e2e", "spec", "projectID")).To(Succeed())
	// The key's token_uri must be on the endpoint's host (or Google's), so
	// the key of a dead endpoint names a token endpoint there too.
	dead := deadLoopbackAddr()
	key["token_uri"] = "http://" + dead + "/token"
	deadKey, err := json.Marshal(key)
	Expect(err).NotTo(HaveOccurred())
	deadSecret := healthSecret(cluster.BackendGCP, healthUnreachable, map[string][]byte{"credentials.json": deadKey})
	unreachable := mk(healthUnreachable, "an endpoint on a loopback port where nothing listens", "http://"+dead, deadSecret.Name, reasonTransient,
		And(ContainSubstring(dead), ContainSubstring("connection refused")))
	unreachable.secret = deadSecret
	return []brokenConfig{bad, noProject, unreachable}
}

// brokenKVMConfigs reach the private libvirtd over SSH (an in-process
// server on loopback that forwards to its socket) with a key the server
// refuses, and over SSH to a dead loopback port.
func brokenKVMConfigs(_ context.Context) []brokenConfig {
	srv := dialertest.NewSSHServer(GinkgoTB(), env.c.Libvirt.Daemon.Socket)
	_, other, err := ed25519.GenerateKey(rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	block, err := ssh.MarshalPrivateKey(other, "")
	Expect(err).NotTo(HaveOccurred())
	refused := pem.EncodeToMemory(block)
	dead := deadLoopbackAddr()
	deadHosts := []byte(knownhosts.Line([]string{knownhosts.Normalize(dead)}, srv.HostKey) + "\n")
	// The provider runs as a pod: it reaches the server on the host's
	// loopback at the node's address of a forwarder.
	addr, err := env.c.Node.Expose(srv.Addr)
	Expect(err).NotTo(HaveOccurred())
	hosts := []byte(knownhosts.Line([]string{knownhosts.Normalize(addr)}, srv.HostKey) + "\n")

	mk := func(name, what, addr string, key, hosts []byte, reason string, msg OmegaMatcher) brokenConfig {
		s := healthSecret(cluster.BackendKVM, name, map[string][]byte{dialer.KeySSHPrivateKey: key, dialer.KeyKnownHosts: hosts})
		pc := cluster.KVMProviderConfig("ClusterProviderConfig", "", name, "qemu+ssh://root@"+addr+"/system")
		creds := map[string]any{"source": "Secret", "secretRef": map[string]any{"name": s.Name, "namespace": s.Namespace}}
		Expect(unstructured.SetNestedMap(pc.Object, creds, "spec", "credentials")).To(Succeed())
		return brokenConfig{what: what, secret: s, config: pc, reason: reason, message: msg}
	}
	return []brokenConfig{
		mk(healthBadCredentials, "an SSH key the host refuses", addr, refused, hosts, reasonPermanent,
			ContainSubstring("unable to authenticate")),
		mk(healthUnreachable, "an SSH host on a loopback port where nothing listens", dead, srv.PrivateKey, deadHosts, reasonTransient,
			And(ContainSubstring(dead), ContainSubstring("connection refused"))),
	}
}
