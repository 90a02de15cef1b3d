/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	. "github.com/onsi/gomega" //nolint:revive // Gomega's DSL reads best dot-imported.
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/egressproxy/provider-egressproxy/internal/backend/gcp"
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
	instance:     gcpInstance,
	accessLog:    gcpAccessLog,
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

// gcpInstance reads the instance from the fake with the real compute client
// (as the provider does): its numeric ID and creationTimestamp, and the boot
// ID its guest reports (guest attribute egressproxy/boot-id, which the
// reporter rewrites with each report; a reboot changes it).
func gcpInstance(ctx context.Context, g Gomega, mr *unstructured.Unstructured) instanceIdentity {
	id := str(mr, "status", "atProvider", "instanceID")
	f := strings.Split(strings.TrimPrefix(id, gcp.IDScheme+"://"), "/")
	g.Expect(f).To(HaveLen(3), "instanceID %q is gce://<project>/<zone>/<name>", id)
	c, err := compute.NewInstancesRESTClient(ctx, option.WithEndpoint(env.c.GCE.URL), option.WithHTTPClient(gcpTestClient(ctx, g)))
	g.Expect(err).NotTo(HaveOccurred())
	defer c.Close() //nolint:errcheck // Read only.
	inst, err := c.Get(ctx, &computepb.GetInstanceRequest{Project: f[0], Zone: f[1], Instance: f[2]})
	g.Expect(err).NotTo(HaveOccurred())
	ga, err := c.GetGuestAttributes(ctx, &computepb.GetGuestAttributesInstanceRequest{Project: f[0], Zone: f[1], Instance: f[2], VariableKey: proto.String(gcp.GuestBootIDPath)})
	g.Expect(err).NotTo(HaveOccurred(), "the guest reports its boot ID")
	return instanceIdentity{ID: strconv.FormatUint(inst.GetId(), 10), CreatedAt: inst.GetCreationTimestamp(), BootID: ga.GetVariableValue()}
}

// gcpAccessLog reads squid's access log from the journal of the instance's
// guest, which the fake runs as domain gce-<name>-<id> of its own libvirtd,
// through the guest agent (on GCE, the platform's log agent reads it).
func gcpAccessLog(ctx context.Context, g Gomega, mr *unstructured.Unstructured) string {
	g.Expect(env.c.GCE.Guests).NotTo(BeNil(), "the GCE fake runs no guests: %s", env.c.GCE.NoGuests)
	id := str(mr, "status", "atProvider", "instanceID")
	name := id[strings.LastIndex(id, "/")+1:]
	l := dialLibvirt(g, env.c.GCE.Guests.Daemon.URI("qemu"))
	defer l.Disconnect() //nolint:errcheck // Read only.
	dom, err := l.DomainLookupByName(fmt.Sprintf("gce-%s-%s", name, gcpInstance(ctx, g, mr).ID))
	g.Expect(err).NotTo(HaveOccurred())
	return guestRun(g, l, dom, "/bin/journalctl", vmAccessLogArgs...)
}

// gcpToken is a bearer token the fake accepts (it requires one, as GCE
// does), registered once.
const gcpToken = "e2e-instance-identity"

var gcpTokenOnce sync.Once

// gcpTestClient is an HTTP client that sends gcpToken.
func gcpTestClient(ctx context.Context, g Gomega) *http.Client {
	var err error
	gcpTokenOnce.Do(func() {
		_, err = env.c.GCE.Admin(ctx, http.MethodPost, "/_fake/tokens", []byte(`{"token":"`+gcpToken+`"}`))
	})
	g.Expect(err).NotTo(HaveOccurred())
	return &http.Client{Transport: bearer{token: gcpToken, next: http.DefaultTransport}}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

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
