/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package traffic

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestLoadAndTunnel(t *testing.T) {
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, Body) }))
	defer origin.Close()
	host := strings.TrimPrefix(origin.URL, "https://")
	proxy := fakeProxy(t, host)
	defer proxy.Close()
	pu, _ := url.Parse(proxy.URL)
	pu.User = url.UserPassword("user", "pw")
	roots := origin.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs //nolint:forcetypeassert // httptest's.
	c := Client{Proxy: pu, Roots: roots}

	tun, err := c.Tunnel(t.Context(), host)
	if err != nil {
		t.Fatalf("Tunnel(...): %v", err)
	}
	defer tun.Close() //nolint:errcheck // Test.
	get := func(target string) func(context.Context, Client) (Result, error) {
		return func(ctx context.Context, c Client) (Result, error) { return c.Get(ctx, target) }
	}
	probes := []Probe{{Name: "allowed", Send: get("http://" + host + "/")}, {Name: "other", Send: get("http://192.0.2.1/")}}
	ok := 0
	recs := Load{Client: c, Workers: 2, Every: time.Millisecond, Max: 100}.Run(t.Context(), probes, func(r Record) bool {
		if r.Probe == "allowed" && r.Code == http.StatusOK {
			ok++
		}
		return ok == 5
	})
	got := map[string]int{}
	for _, r := range recs {
		if r.Err != nil {
			t.Errorf("record %+v: %v", r, r.Err)
		}
		got[r.Probe+" "+http.StatusText(r.Code)]++
	}
	if got["allowed OK"] < 5 || got["other Forbidden"] == 0 || len(recs) >= 100 {
		t.Errorf("Load.Run: %v in %d records, want it to stop after 5 allowed", got, len(recs))
	}
	// The tunnel stays usable after, for many requests on one connection.
	for i := range 3 {
		if err := tun.Ping(t.Context()); err != nil {
			t.Fatalf("Ping %d: %v", i, err)
		}
	}
	if _, err := c.As(url.UserPassword("user", "wrong")).Tunnel(t.Context(), host); err == nil {
		t.Error("Tunnel with wrong credentials: no error, want the 407")
	}
}
