/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package watchconn

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
)

// TestNewHTTPClient counts the connections to an HTTP/2 server over TLS, as
// an API server, that requests of two clients of one config come on: two
// made as controller-runtime makes its client and cache
// (rest.HTTPClientFor) share one; one made by NewHTTPClient has its own.
func TestNewHTTPClient(t *testing.T) {
	var mu sync.Mutex
	// The connections requests came on, by the client's address.
	conns := map[string]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			t.Errorf("request over HTTP/%d, want HTTP/2 as client-go speaks to an API server", r.ProtoMajor)
		}
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
	}}

	count := func(clients ...*http.Client) int {
		mu.Lock()
		clear(conns)
		mu.Unlock()
		for _, c := range clients {
			rsp, err := c.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			_ = rsp.Body.Close()
		}
		mu.Lock()
		defer mu.Unlock()
		return len(conns)
	}
	newShared := func() *http.Client {
		c, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	own, err := NewHTTPClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{
		"client and cache of one config":       count(newShared(), newShared()),
		"client, and a cache on NewHTTPClient": count(newShared(), own),
	}
	want := map[string]int{
		"client and cache of one config":       1,
		"client, and a cache on NewHTTPClient": 2,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("connections the requests came on: -want, +got:\n%s", diff)
	}
	if cfg.Dial != nil {
		t.Error("NewHTTPClient changed the config it was given")
	}
}
