/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package watchconn gives an informer cache a connection to its API server
// of its own.
//
// client-go keeps one transport per distinct TLS config, and over HTTP/2
// one connection per transport: a controller-runtime client and cache made
// from the same config share one connection, so the cache's watch events
// are framed by the API server among the responses to every worker's
// requests, by one goroutine per connection. While 1000 GCPProxies
// converged on a busy API server, the provider's cache saw its own writes
// 3.4–4.6 s after their responses (median), while another client's watch
// of the same resources, on a connection of its own, saw them within a
// second (docs/bench.md at 22cd24f, "a connection for the watches").
package watchconn

import (
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// NewHTTPClient returns an HTTP client for cfg whose connections no other
// client shares. A config with a dial function gets a transport of its own
// (client-go wraps the function anew for each client), so one is set where
// cfg has none.
func NewHTTPClient(cfg *rest.Config) (*http.Client, error) {
	c := rest.CopyConfig(cfg)
	if c.Dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		c.Dial = d.DialContext
	}
	return rest.HTTPClientFor(c)
}
