/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best dot-imported.
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/dialer"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/guestimage"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/libvirtd"
)

// The provider's pod reaches the sandbox's libvirtd as a remote libvirt
// host: qemu+ssh to a real OpenSSH sshd on it, the host key pinned through
// the config's known_hosts (cluster.SSHD).
var _ = Describe("The kvm backend over qemu+ssh", Ordered, Label("kvm"), func() {
	BeforeAll(func() { skipUnless(cluster.BackendKVM) })

	It("reaches the sandbox's libvirtd through a real sshd: the default config is qemu+ssh and Healthy, the pod mounts no host path", func(ctx SpecContext) {
		sshd := env.c.Libvirt.SSH
		cpc := schema.GroupVersionKind{Group: "kvm.m.egressproxy.io", Version: "v1alpha1", Kind: "ClusterProviderConfig"}
		timed("kvm: the qemu+ssh config is Healthy", func() {
			Eventually(func(g Gomega) {
				u := get(ctx, g, cpc, "", cluster.ProviderConfigName)
				g.Expect(str(u, "spec", "uri")).To(And(HavePrefix("qemu+ssh://"+sshd.User+"@"+sshd.Addr+"/"), Equal(env.c.Libvirt.ProviderURI)))
				g.Expect(cond(u, "Healthy")).To(HavePrefix("True: Available"))
			}).WithContext(ctx).WithTimeout(healthTimeout).WithPolling(time.Second).Should(Succeed())
		})
		pods, err := env.c.ProviderPods(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(pods).NotTo(BeEmpty())
		for _, p := range pods {
			for _, v := range p.Spec.Volumes {
				Expect(v.HostPath).To(BeNil(), "pod %s mounts the host path %v", p.Name, v.HostPath)
			}
		}
		b, err := os.ReadFile(sshd.Log)
		Expect(err).NotTo(HaveOccurred())
		// Two logins are the harness's checks (from the host, then from
		// the node); the others are the provider's.
		logins := strings.Count(string(b), "Accepted publickey for "+sshd.User)
		GinkgoWriter.Printf("sshd accepted %d logins with the config's key\n", logins)
		Expect(logins).To(BeNumerically(">", 2), "sshd logged no login of the provider's:\n%s", b)
	})

	It("refuses a host key known_hosts does not list, and a host it lists no key for: the KVMProxy's Synced condition says so "+
		"and nothing is created", func(ctx SpecContext) {
		sshd := env.c.Libvirt.SSH
		host := knownhosts.Normalize(sshd.Addr)
		_, other, err := ed25519.GenerateKey(rand.Reader)
		Expect(err).NotTo(HaveOccurred())
		otherKey, err := ssh.NewSignerFromKey(other)
		Expect(err).NotTo(HaveOccurred())
		cases := []struct {
			name, what string
			knownHosts []byte
			message    OmegaMatcher
		}{{
			name: "kvm-e2e-wrong-host-key", what: "another key for the host",
			knownHosts: []byte(knownhosts.Line([]string{host}, otherKey.PublicKey()) + "\n"),
			message:    And(ContainSubstring("host key of "+host+" is not the one known_hosts lists"), ContainSubstring("knownhosts: key mismatch")),
		}, {
			// The right key, for a name the provider does not dial.
			name: "kvm-e2e-unknown-host", what: "the key for another name only",
			knownHosts: []byte(knownhosts.Line([]string{"libvirt.example.com"}, sshd.HostKey) + "\n"),
			message:    ContainSubstring("known_hosts has no key for " + host + ": host key verification is mandatory"),
		}}
		ns := "team-a"
		ensureNamespace(ctx, ns)
		domainsBefore := sandboxDomains()
		var proxies []*unstructured.Unstructured
		for _, tc := range cases {
			s := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: cluster.CrossplaneNamespace, Name: tc.name},
				Data:       map[string][]byte{dialer.KeySSHPrivateKey: sshd.PrivateKey, dialer.KeyKnownHosts: tc.knownHosts},
			}
			Expect(env.c.Client.Create(ctx, s)).To(Succeed())
			DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(env.c.Client.Delete(ctx, s))).To(Succeed()) })
			pc := cluster.KVMSSHProviderConfig(tc.name, env.c.Libvirt.ProviderURI, cluster.CrossplaneNamespace, tc.name)
			Expect(env.c.Client.Create(ctx, pc)).To(Succeed())
			DeferCleanup(func(ctx context.Context) { deleteAndWait(ctx, pc) })
			mr := sshProxy(ns, tc.name)
			Expect(env.c.Client.Create(ctx, mr)).To(Succeed())
			proxies = append(proxies, mr)
		}
		for i, tc := range cases {
			timed("kvm: a KVMProxy whose config's known_hosts has "+tc.what+" is refused", func() {
				Eventually(func(g Gomega) {
					u := get(ctx, g, cluster.ManagedGVK(cluster.BackendKVM), ns, proxies[i].GetName())
					c, ok := cluster.Condition(u, "Synced")
					g.Expect(ok).To(BeTrue(), "no Synced condition yet")
					g.Expect(c["status"]).To(Equal("False"), cond(u, "Synced"))
					g.Expect(c["message"]).To(tc.message)
					g.Expect(str(u, "status", "atProvider", "instanceID")).To(BeEmpty())
					GinkgoWriter.Printf("KVMProxy with %s: Synced=%s\n", tc.what, cond(u, "Synced"))
				}).WithContext(ctx).WithTimeout(changeTimeout).WithPolling(time.Second).Should(Succeed())
			})
		}
		Expect(sandboxDomains()).To(Equal(domainsBefore), "a refused host got a domain")
		// A refused proxy has no finalizer (the provider adds it once it
		// reached the backend), so it goes at once.
		for _, mr := range proxies {
			deleteAndWait(ctx, mr)
		}
	})
})

// sshProxy is a small KVMProxy of the sandbox's pool and network, using the
// ClusterProviderConfig config.
func sshProxy(ns, config string) *unstructured.Unstructured {
	mr := cluster.Object(cluster.ManagedGVK(cluster.BackendKVM))
	mr.SetNamespace(ns)
	mr.SetName(config)
	mr.Object["spec"] = map[string]any{
		"forProvider": map[string]any{
			"pool":                libvirtd.DefaultPool,
			"baseImageVolume":     cluster.GuestImageVolume,
			"network":             map[string]any{"name": libvirtd.DefaultNetwork},
			"domainType":          "qemu",
			"vcpus":               int64(1),
			"memoryMiB":           int64(guestimage.RecommendedMemoryMiB),
			"allowedClientCIDRs":  []any{"10.0.0.0/8"},
			"allowedDestinations": []any{"api.example.com"},
		},
		"providerConfigRef":          map[string]any{"kind": "ClusterProviderConfig", "name": config},
		"writeConnectionSecretToRef": map[string]any{"name": config + "-proxy"},
	}
	return mr
}

// sandboxDomains lists the names of the sandbox's domains, sorted.
func sandboxDomains() []string {
	l := dialLibvirt(Default, env.c.Libvirt.URI)
	defer l.Disconnect() //nolint:errcheck // Read only.
	doms, _, err := l.ConnectListAllDomains(1, 0)
	Expect(err).NotTo(HaveOccurred())
	names := make([]string, 0, len(doms))
	for _, d := range doms {
		names = append(names, d.Name)
	}
	slices.Sort(names)
	return names
}
