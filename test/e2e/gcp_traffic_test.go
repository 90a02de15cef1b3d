/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

// The gcp backend's traffic: where a private libvirtd runs, the GCE fake
// gives every RUNNING instance a real guest (package guestvm: the guest
// image, booted with the instance's user-data and startup-script, in the
// fake's own libvirt sandbox), so the GCPProxy is Ready only once that
// guest reports that squid serves, and the claim's proxy URL (the
// instance's external IP, a DNAT to the guest as GCE's 1:1 NAT) takes real
// requests from a client in the sandbox's network namespace. The shared
// "serves traffic" specs (traffic_test.go) send them; a change of the
// allowlist or of the password replaces the instance, so each boots a new
// guest.

// gcpReadyTimeout bounds one instance's way to Ready: the GCE fake's
// operations, then one guest boot under TCG until its startup-script
// reports that squid serves (1.5 to 4 minutes on a busy machine).
const gcpReadyTimeout = 8 * time.Minute

var gcpTraffic = &trafficCase{
	unavailable: func() string {
		switch {
		case env.c.GCE == nil:
			return "no GCE fake runs here"
		case env.c.GCE.Guests == nil:
			return "the GCE fake simulates its guests: " + env.c.GCE.NoGuests
		}
		return ""
	},
	netns: func() string { return env.c.GCE.Guests.NetNS },
	// The client reaches the external IP through the sandbox's bridge, so
	// squid sees the bridge's address.
	clientCIDR:    func() string { return env.c.GCE.Guests.Prepared.Subnet.String() },
	privateOrigin: func() string { return env.c.GCE.Guests.Prepared.Gateway.String() },
	composition:   applyTrafficGCPComposition,
	readyTimeout:  gcpReadyTimeout,
}

// trafficGCPComposition is the shipped gcp Composition without the
// guardrails that forbid private destinations, so that a claim can allow
// one and see squid refuse it (denyPrivateDestinations).
const trafficGCPComposition = `
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xegressproxies-gcp-e2e-traffic
  labels:
    egressproxy.io/e2e: gcp-traffic
spec:
  compositeTypeRef:
    apiVersion: egressproxy.io/v1alpha1
    kind: XEgressProxy
  writeConnectionSecretsToNamespace: crossplane-system
  mode: Pipeline
  pipeline:
  - step: compose-proxy
    functionRef:
      name: egressproxy-function-egressproxy
    input:
      apiVersion: egressproxy.fn.egressproxy.io/v1alpha1
      kind: Input
      backend: gcp
      providerConfigRef:
        kind: ClusterProviderConfig
        name: default
      gcp:
        zone: europe-west1-b
        image: projects/debian-cloud/global/images/family/debian-12
        network: default
        machineTypes:
          small: e2-small
          medium: e2-medium
          large: e2-standard-2
`

func applyTrafficGCPComposition(ctx context.Context) map[string]string {
	Expect(env.c.ApplyYAML(ctx, "gcp traffic composition", []byte(trafficGCPComposition))).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		objs, err := cluster.Decode("gcp traffic composition", []byte(trafficGCPComposition))
		Expect(err).NotTo(HaveOccurred())
		Expect(client.IgnoreNotFound(env.c.Client.Delete(ctx, objs[0]))).To(Succeed())
	})
	return map[string]string{labelE2E: "gcp-traffic"}
}
