/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

const (
	// upgradeVersion is what the suite upgrades the installed packages to.
	upgradeVersion = "v0.2.0"
	// brokenVersion is a Configuration that needs a Crossplane that does
	// not exist.
	brokenVersion = "v0.3.0"
	upgradeNS     = "team-upgrade"
	// upgradeReadyTimeout bounds the claims' way to Ready: a real guest per
	// VM backend boots under TCG, two at once.
	upgradeReadyTimeout = 8 * time.Minute
	// settle is a few polls of the new provider (--poll=5s) over the
	// existing proxies, for anything it would change to show.
	settle = 20 * time.Second
)

// The packages are upgraded the way a platform team upgrades them: a new
// version pushed to the registry and the Configurations pointed at it;
// Crossplane rolls the Provider and the Function revisions. No proxy may
// notice.
var _ = Describe("upgrading the installed packages", Ordered, Label("upgrade"), func() {
	var claims []*unstructured.Unstructured
	BeforeAll(func(ctx SpecContext) {
		ensureNamespace(ctx, upgradeNS)
		for _, b := range cluster.Backends() {
			if _, skip := env.skipped[b]; skip {
				continue
			}
			if why, missing := env.missing[b]; missing {
				skipUnless(b) // fails with CI=true
				GinkgoWriter.Printf("the upgrade leaves out the %s backend: %s\n", b, why)
				continue
			}
			cl := newClaim(upgradeNS, "up-"+string(b), map[string]string{LabelBackend: string(b)})
			Expect(env.c.Client.Create(ctx, cl)).To(Succeed())
			claims = append(claims, cl)
			DeferCleanup(func(ctx SpecContext) { deleteAndWait(ctx, cl) })
		}
		Expect(claims).NotTo(BeEmpty())
		timed(fmt.Sprintf("upgrade: %d claims (one per backend) -> Ready", len(claims)), func() {
			Eventually(ctx, func(g Gomega) {
				for _, cl := range claims {
					c := get(ctx, g, cluster.ClaimGVK(), cl.GetNamespace(), cl.GetName())
					g.Expect(cond(c, "Ready")).To(HavePrefix("True"), "claim %s", cl.GetName())
					g.Expect(cond(c, "Synced")).To(HavePrefix("True"), "claim %s", cl.GetName())
				}
			}).WithTimeout(upgradeReadyTimeout).WithPolling(time.Second).Should(Succeed())
		})
	})

	It("rolls the Provider and the Function to "+upgradeVersion+" and keeps every proxy: claims Ready throughout, "+
		"no instance recreated, connection Secrets unchanged", func(ctx SpecContext) {
		before := identities(ctx, claims)
		oldRev := env.c.ProviderRevisionName
		w := watchReady(ctx, claims)
		timed("upgrade: Configurations "+cluster.PackageVersion+" -> "+upgradeVersion+", new provider and function running", func() {
			overlay := filepath.Join(GinkgoT().TempDir(), "overlay")
			Expect(cluster.WriteUpgradeOverlay(overlay)).To(Succeed())
			Expect(env.c.Upgrade(ctx, upgradeVersion, overlay)).To(Succeed())
		})
		Expect(env.c.ProviderRevisionName).NotTo(Equal(oldRev), "the ProviderRevision rolled")
		// The new version's change is in the cluster.
		crd := get(ctx, Default, gvkCRD, "", "kubernetesproxies.kubernetes.m.egressproxy.io")
		b, err := json.Marshal(crd.Object["spec"])
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(ContainSubstring(cluster.UpgradePrinterColumn))
		time.Sleep(settle)
		Expect(w.stop()).To(BeEmpty(), "claims not Ready or not Synced during the upgrade")
		Expect(identities(ctx, claims)).To(Equal(before),
			"the upgrade must not recreate an instance or rewrite a connection Secret")
		GinkgoWriter.Printf("upgraded with %d claims Ready throughout, identities unchanged:\n  %s\n", len(claims), strings.Join(before, "\n  "))
	})

	It("keeps the running provider and function when a Configuration's next version needs a Crossplane that does not exist", func(ctx SpecContext) {
		cfg := cluster.Configurations[0]
		meta, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "package", cfg.Part, "crossplane.yaml"))
		Expect(err).NotTo(HaveOccurred())
		bad := regexp.MustCompile(`(?m)^(\s+crossplane:\s*\n\s+version:\s*).*$`).ReplaceAllString(string(meta), `${1}">=v99.0.0"`)
		Expect(bad).NotTo(Equal(string(meta)), "spec.crossplane.version in package/%s/crossplane.yaml", cfg.Part)
		overlay := filepath.Join(GinkgoT().TempDir(), "overlay")
		Expect(os.MkdirAll(filepath.Join(overlay, cfg.Part), 0o700)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(overlay, cfg.Part, "crossplane.yaml"), []byte(bad), 0o600)).To(Succeed())
		before := identities(ctx, claims)
		prov, fn := env.c.ProviderRevisionName, env.c.FunctionRevisionName
		pods, err := env.c.ProviderPods(ctx)
		Expect(err).NotTo(HaveOccurred())
		w := watchReady(ctx, claims)
		Expect(env.c.SetConfigurationVersion(ctx, cfg.Name, brokenVersion, overlay)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.c.SetConfigurationVersion(ctx, cfg.Name, upgradeVersion, "")).To(Succeed())
		})
		var seen string
		Eventually(ctx, func(g Gomega) {
			u := get(ctx, g, gvkConfigPkg, "", cfg.Name)
			seen = cond(u, "Healthy") + " / " + cond(u, "Installed")
			g.Expect(seen).To(ContainSubstring("incompatible Crossplane version"))
		}).WithTimeout(changeTimeout).WithPolling(poll).Should(Succeed())
		GinkgoWriter.Printf("Configuration %s at %s: %s\n", cfg.Name, brokenVersion, seen)
		time.Sleep(settle)
		Expect(w.stop()).To(BeEmpty(), "claims not Ready or not Synced after the broken version")
		for _, p := range []struct {
			gvk  schema.GroupVersionKind
			name string
			want string
		}{{cluster.ProviderRevision, cluster.ProviderName, prov}, {cluster.FunctionRevision, cluster.FunctionName, fn}} {
			var active []string
			for _, r := range list(ctx, p.gvk, client.MatchingLabels{cluster.LabelPackage: p.name}) {
				if str(&r, "spec", "desiredState") == "Active" {
					active = append(active, r.GetName())
				}
			}
			Expect(active).To(Equal([]string{p.want}), "active %s", p.gvk.Kind)
		}
		after, err := env.c.ProviderPods(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(podRuns(after)).To(Equal(podRuns(pods)), "the provider's pods, their containers' restarts")
		Expect(identities(ctx, claims)).To(Equal(before))
	})
})

// identities returns, per claim, what changes when its proxy is recreated:
// its managed resource's UID, external name, the backend's instance ID and
// creation time, endpoint, egress IPs, and a digest of its connection
// Secret.
func identities(ctx SpecContext, claims []*unstructured.Unstructured) []string {
	var out []string
	for _, cl := range claims {
		c := composedOf(ctx, Default, cl)
		s := &corev1.Secret{}
		Expect(env.c.Client.Get(ctx, client.ObjectKey{Namespace: cl.GetNamespace(), Name: cl.GetName() + "-proxy"}, s)).To(Succeed())
		keys := make([]string, 0, len(s.Data))
		for k := range s.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		h := sha256.New()
		for _, k := range keys {
			_, _ = fmt.Fprintf(h, "%s=%x;", k, s.Data[k])
		}
		ips, _, _ := unstructured.NestedStringSlice(c.mr.Object, "status", "atProvider", "egressIPs")
		out = append(out, fmt.Sprintf("%s %s uid=%s external-name=%s instance=%s created=%s endpoint=%s egress=%v secret uid=%s sha256=%x",
			c.mr.GetKind(), c.mr.GetName(), c.mr.GetUID(), c.mr.GetAnnotations()["crossplane.io/external-name"],
			str(c.mr, "status", "atProvider", "instanceID"), str(c.mr, "status", "atProvider", "createdAt"),
			str(c.mr, "status", "atProvider", "endpoint"), ips, s.GetUID(), h.Sum(nil)[:8]))
	}
	return out
}

// readyWatch polls claims until stopped and records every time one was not
// Ready or not Synced.
type readyWatch struct {
	done   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	broken []string
}

func watchReady(ctx SpecContext, claims []*unstructured.Unstructured) *readyWatch {
	w := &readyWatch{done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer GinkgoRecover()
		defer w.wg.Done()
		for {
			for _, cl := range claims {
				c, err := env.c.Get(ctx, cluster.ClaimGVK(), cl.GetNamespace(), cl.GetName())
				if err != nil {
					continue
				}
				for _, typ := range []string{"Ready", "Synced"} {
					if m := cond(c, typ); !strings.HasPrefix(m, "True") {
						w.mu.Lock()
						w.broken = append(w.broken, fmt.Sprintf("%s %s %s=%s", time.Now().Format(time.TimeOnly), cl.GetName(), typ, m))
						w.mu.Unlock()
					}
				}
			}
			select {
			case <-w.done:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return w
}

func (w *readyWatch) stop() []string {
	close(w.done)
	w.wg.Wait()
	return w.broken
}
