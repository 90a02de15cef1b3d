/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/discovery"

	kubeenv "github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// TestProviderInformersList runs the real provider command against a real
// API server and reads, in the API server's own request metrics, that the
// provider's informers filled themselves with a LIST (served from the watch
// cache) and not with a streaming list, which starts with a WATCH
// (watchlist.go). Nothing else lists KubernetesProxies here.
func TestProviderInformersList(t *testing.T) {
	env := kubeenv.Start(t)
	ctx := t.Context()
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var log bytes.Buffer
	cmd := provider(pctx, env.Kubeconfig,
		"--metrics-bind-address="+freePort(t), "--health-probe-bind-address="+freePort(t), "--gc-interval=0")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() { cancel(); <-done }()

	deadline := time.Now().Add(time.Minute)
	for {
		raw, err := dc.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if requested(string(raw), "kubernetesproxies", "LIST") {
			return
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("provider exited: %v\n%s", err, log.String())
		case <-time.After(300 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API server saw no LIST of kubernetesproxies in a minute; its requests for them:\n%s", requests(string(raw), "kubernetesproxies"))
		}
	}
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
