/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	. "github.com/onsi/gomega" //nolint:revive // Gomega's DSL reads best dot-imported.
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

var _ = registerHealth(healthCase{backend: cluster.BackendGCP, group: "gcp.m.egressproxy.io", broken: brokenGCPConfigs})

var _ = describeBackend(backendCase{
	backend: cluster.BackendGCP,
	// The fake hands out static addresses from 203.0.113.0/24 and
	// ephemeral ones from 198.51.100.0/24.
	egressIP:    MatchRegexp(`^(203\.0\.113|198\.51\.100)\.[0-9]+$`),
	backendGone: gcpGone,
	// A real guest boots for each instance (gcp_traffic_test.go).
	readyTimeout: gcpReadyTimeout,
	traffic:      gcpTraffic,
	failure: failureCase{
		what: "the project's instance quota is exhausted",
		setup: func(ctx context.Context) map[string]string {
			// Zero means no limit; the proxy's e2-small has 2 vCPUs.
			_, err := env.c.GCE.Admin(ctx, http.MethodPut, "/_fake/quotas/"+cluster.GCPProject, []byte(`{"cpus":1}`))
			Expect(err).NotTo(HaveOccurred())
			return map[string]string{LabelBackend: string(cluster.BackendGCP)}
		},
		cleanup: func(ctx context.Context) {
			_, err := env.c.GCE.Admin(ctx, http.MethodDelete, "/_fake/faults", nil)
			Expect(err).NotTo(HaveOccurred())
		},
		message: MatchRegexp(`(?i)quota`),
	},
})

// gcpGone asserts that the fake holds no instance, address or firewall of
// the deleted proxy.
func gcpGone(ctx context.Context, g Gomega, mr *unstructured.Unstructured) {
	b, err := env.c.GCE.Admin(ctx, http.MethodGet, "/_fake/state", nil)
	g.Expect(err).NotTo(HaveOccurred())
	var state map[string][]struct {
		Name string `json:"name"`
	}
	g.Expect(json.Unmarshal(b, &state)).To(Succeed())
	id := str(mr, "status", "atProvider", "instanceID")
	g.Expect(id).NotTo(BeEmpty(), "the deleted managed resource had reported its instance ID")
	names := map[string]string{
		"instances": id[strings.LastIndex(id, "/")+1:],
		"addresses": str(mr, "status", "atProvider", "addressName"),
		"firewalls": str(mr, "status", "atProvider", "firewallName"),
	}
	for kind, name := range names {
		if name == "" {
			continue
		}
		for _, o := range state[kind] {
			g.Expect(o.Name).NotTo(Equal(name), "%s %s is left in the GCE fake", kind, name)
		}
	}
}
