/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package node

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// TestRelay shows the apiserver's side of the relay: its egress selector
// configuration names the socket, and a CONNECT through the socket reaches
// the target (here in the host's namespace: the relay entered none).
func TestRelay(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "kubelet") }))
	defer target.Close()
	r, err := NewRelay(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close() //nolint:errcheck // Test.
	cfg, err := os.ReadFile(r.Flags()["egress-selector-config-file"])
	if err != nil {
		t.Fatal(err)
	}
	sock := r.l.Addr().String()
	if !strings.Contains(string(cfg), "udsName: "+sock) || !strings.Contains(string(cfg), "name: cluster") {
		t.Errorf("the egress selector configuration must send the cluster traffic to %s:\n%s", sock, cfg)
	}

	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() //nolint:errcheck // Test.
	host := strings.TrimPrefix(target.URL, "http://")
	_, _ = io.WriteString(c, "CONNECT "+host+" HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT through the relay: %v, %v", resp, err)
	}
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "kubelet" {
		t.Errorf("through the tunnel: got %q, want the target's answer", body)
	}
}
