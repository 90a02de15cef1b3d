/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/discovery"

	kubeenv "github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// TestProviderInformersList runs the real provider command against a real
// API server and reads, in the API server's own request metrics, that the
// provider's informers filled themselves with a LIST, which the API server
// serves at once, and not with a streaming list, which starts with a WATCH
// (watchlist.go). Nothing else lists KubernetesProxies here.
func TestProviderInformersList(t *testing.T) {
	env := kubeenv.Start(t)
	ctx := t.Context()
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}

	p := startProvider(t, env.Kubeconfig, nil,
		"--metrics-bind-address="+freePort(t), "--health-probe-bind-address="+freePort(t), "--gc-interval=0")
	p.await(t, time.Minute, 300*time.Millisecond, func() (bool, string) {
		raw, err := dc.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return false, err.Error()
		}
		return requested(string(raw), "kubernetesproxies", "LIST"),
			"the API server saw no LIST of kubernetesproxies; its requests for them:\n" + requests(string(raw), "kubernetesproxies")
	})
}

// requests returns the lines of apiserver_request_total about resource.
func requests(metrics, resource string) string {
	var out []string
	for l := range strings.Lines(metrics) {
		if strings.HasPrefix(l, "apiserver_request_total{") && strings.Contains(l, `resource="`+resource+`"`) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// requested tells whether the API server counted a request with verb for
// resource.
func requested(metrics, resource, verb string) bool {
	return strings.Contains(requests(metrics, resource), `verb="`+verb+`"`)
}
