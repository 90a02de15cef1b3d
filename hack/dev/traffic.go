/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/traffic"
)

// allowTraffic lets an example claim serve make dev's request: it allows
// the origin and, unless the claim allows it already, the client's network.
func allowTraffic(c *cluster.Cluster, b cluster.Backend, claim *unstructured.Unstructured) {
	site, ok := c.TrafficSite(b)
	if !ok {
		return
	}
	dests, _, _ := unstructured.NestedStringSlice(claim.Object, "spec", "allowedDestinations")
	_ = unstructured.SetNestedStringSlice(claim.Object, append(dests, traffic.AllowedOrigin+"/32"), "spec", "allowedDestinations")
	clients, _, _ := unstructured.NestedStringSlice(claim.Object, "spec", "allowedClientCIDRs")
	want := netip.MustParsePrefix(site.ClientCIDR)
	if !slices.ContainsFunc(clients, func(s string) bool {
		p, err := netip.ParsePrefix(s)
		return err == nil && p.Bits() <= want.Bits() && p.Contains(want.Addr())
	}) {
		_ = unstructured.SetNestedStringSlice(claim.Object, append(clients, site.ClientCIDR), "spec", "allowedClientCIDRs")
	}
}

// proxiedRequests sends one request through each claim's proxy, with the
// URL and credentials of its connection Secret, to an origin in the
// backend's network namespace, and prints the answer.
func proxiedRequests(ctx context.Context, c *cluster.Cluster, ns string, claims []claim) {
	fmt.Println("\n[dev] one request through each proxy (client and origin in the backend's own network namespace):")
	origins := map[string]*traffic.Origin{}
	defer func() {
		for _, o := range origins {
			o.Close()
		}
	}()
	for _, cl := range claims {
		site, ok := c.TrafficSite(cl.backend)
		if !ok {
			fmt.Printf("  %-10s %s: no client and origin for this backend here\n", cl.backend, cl.name)
			continue
		}
		o := origins[site.NetNS]
		if o == nil {
			var err error
			if o, err = traffic.StartOrigin(site.NetNS, traffic.AllowedOrigin); err != nil {
				fmt.Printf("  %-10s %s: cannot start the origin: %v\n", cl.backend, cl.name, err)
				continue
			}
			origins[site.NetNS] = o
		}
		u, err := proxyURL(ctx, c, ns, cl.name)
		if err != nil {
			fmt.Printf("  %-10s %s: %v\n", cl.backend, cl.name, err)
			continue
		}
		target := "http://" + traffic.AllowedOrigin + "/"
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := traffic.Client{NetNS: site.NetNS, Proxy: u, Resolve: site.Resolve}.Get(rctx, target)
		cancel()
		shown := *u
		shown.User = url.User(u.User.Username())
		if err != nil {
			fmt.Printf("  %-10s %s: GET %s through %s: %v\n", cl.backend, cl.name, target, shown.String(), err)
			continue
		}
		fmt.Printf("  %-10s %s: GET %s through %s -> %s\n", cl.backend, cl.name, target, shown.String(), res)
	}
}

// proxyURL reads the url of a claim's connection Secret.
func proxyURL(ctx context.Context, c *cluster.Cluster, ns, name string) (*url.URL, error) {
	u, err := c.Get(ctx, cluster.ClaimGVK(), ns, name)
	if err != nil {
		return nil, err
	}
	s := &corev1.Secret{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: nested(u, "spec", "writeConnectionSecretToRef", "name")}, s); err != nil {
		return nil, err
	}
	return url.Parse(string(s.Data["url"]))
}
