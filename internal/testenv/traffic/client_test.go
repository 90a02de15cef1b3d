/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package traffic

import (
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeProxy answers like squid: 407 without the right credentials, 403 for
// any destination but allowed, else it forwards (CONNECT: it tunnels).
func fakeProxy(t *testing.T, allowed string) *httptest.Server {
	t.Helper()
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("user:pw"))
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != want {
			w.WriteHeader(http.StatusProxyAuthRequired)
			return
		}
		if r.Host != allowed {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		if r.Method != http.MethodConnect {
			_, _ = io.WriteString(w, Body)
			return
		}
		up, err := net.Dial("tcp", allowed)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		conn, buf, _ := w.(http.Hijacker).Hijack()
		_, _ = io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
		go func() { _, _ = io.Copy(up, buf) }()
		_, _ = io.Copy(conn, up)
		_ = conn.Close()
	}))
}

func TestClient(t *testing.T) {
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, Body) }))
	defer origin.Close()
	host := strings.TrimPrefix(origin.URL, "https://")
	proxy := fakeProxy(t, host)
	defer proxy.Close()
	pu, _ := url.Parse(proxy.URL)
	pu.User = url.UserPassword("user", "pw")
	roots := origin.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs //nolint:forcetypeassert // httptest's.
	c := Client{Proxy: pu, Roots: roots}

	cases := map[string]struct {
		reason string
		c      Client
		get    string
		tunnel string
		want   Result
	}{
		"GetAllowed": {
			reason: "A forwarded GET returns the origin's answer.",
			c:      c,
			get:    "http://" + host + "/",
			want:   Result{Code: http.StatusOK, Body: Body},
		},
		"GetNotAllowed": {
			reason: "A refused GET returns the proxy's status.",
			c:      c,
			get:    "http://192.0.2.1/",
			want:   Result{Code: http.StatusForbidden},
		},
		"NoCredentials": {
			reason: "Without credentials no Proxy-Authorization is sent.",
			c:      c.As(nil),
			get:    "http://" + host + "/",
			want:   Result{Code: http.StatusProxyAuthRequired},
		},
		"ConnectAllowed": {
			reason: "A tunnel carries TLS to the origin, verified with Roots.",
			c:      c,
			tunnel: host,
			want:   Result{Code: http.StatusOK, Body: Body},
		},
		"ConnectRefused": {
			reason: "A refused CONNECT is a status code, not an error.",
			c:      c.As(url.UserPassword("user", "wrong")),
			tunnel: host,
			want:   Result{Code: http.StatusProxyAuthRequired},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got Result
			var err error
			if tc.tunnel != "" {
				got, err = tc.c.Connect(t.Context(), tc.tunnel)
			} else {
				got, err = tc.c.Get(t.Context(), tc.get)
			}
			if err != nil {
				t.Fatalf("%s\nunexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
