/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package node

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

const (
	errRelayListen = "cannot listen on the kubelet relay's socket"
	errRelayConfig = "cannot write the apiserver's egress selector configuration"
)

// A Relay lets a kube-apiserver in the host's network namespace reach what
// lives in a node's (the kubelet, for pods/log, exec and port-forward; the
// pods): the apiserver sends its "cluster" traffic through it (an egress
// selector, HTTP CONNECT over a unix socket), and the Relay dials addresses
// of PodSubnet inside the node's namespace and any other in the host's, as
// the apiserver would have. Without it the apiserver would send a
// connection to the node's address to the host's default route: out of the
// machine.
type Relay struct {
	l      net.Listener
	config string
	mu     sync.Mutex
	netns  string
}

// egressSelector sends the apiserver's cluster traffic to the Relay; the
// control plane's and etcd's stay direct.
const egressSelector = `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`

// NewRelay starts a Relay whose socket and configuration are in dir; Close
// stops it. Until Enter, it dials everything in the host's namespace.
func NewRelay(dir string) (*Relay, error) {
	sock := filepath.Join(dir, "kubelet-relay.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, errors.Wrap(err, errRelayListen)
	}
	r := &Relay{l: l, config: filepath.Join(dir, "egress-selector.yaml")}
	if err := os.WriteFile(r.config, []byte(fmt.Sprintf(egressSelector, sock)), 0o600); err != nil {
		_ = l.Close()
		return nil, errors.Wrap(err, errRelayConfig)
	}
	go r.serve()
	return r, nil
}

// Flags are the kube-apiserver flags that send its cluster traffic through
// r.
func (r *Relay) Flags() map[string]string {
	return map[string]string{"egress-selector-config-file": r.config}
}

// Enter makes r dial PodSubnet inside the network namespace at netns.
func (r *Relay) Enter(netns string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.netns = netns
}

// Close stops r.
func (r *Relay) Close() error { return r.l.Close() }

var podSubnet = netip.MustParsePrefix(PodSubnet)

func (r *Relay) serve() {
	for {
		c, err := r.l.Accept()
		if err != nil {
			return
		}
		go r.relay(c)
	}
}

func (r *Relay) relay(in net.Conn) {
	defer in.Close() //nolint:errcheck // Either side may close first.
	br := bufio.NewReader(in)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		_, _ = io.WriteString(in, "HTTP/1.1 400 Bad Request\r\n\r\n")
		return
	}
	out, err := r.dial(req.Host)
	if err != nil {
		_, _ = io.WriteString(in, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer out.Close() //nolint:errcheck // Either side may close first.
	if _, err := io.WriteString(in, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	go func() {
		_, _ = io.Copy(out, br)
		if tc, ok := out.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	_, _ = io.Copy(in, out)
}

func (r *Relay) dial(hostport string) (net.Conn, error) {
	r.mu.Lock()
	netns := r.netns
	r.mu.Unlock()
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, err
	}
	a, err := netip.ParseAddr(host)
	if netns == "" || err != nil || !podSubnet.Contains(a) {
		return net.Dial("tcp", hostport)
	}
	var c net.Conn
	err = testenv.InNetNS(netns, func() (err error) {
		c, err = net.Dial("tcp", hostport)
		return err
	})
	return c, err
}
