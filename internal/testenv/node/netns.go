/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package node

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// InNetNS runs fn on an OS thread inside the node's network namespace.
// Sockets fn opens stay in that namespace for their whole life, whichever
// goroutine uses them later.
func (n *Node) InNetNS(fn func() error) error { return testenv.InNetNS(n.NetNS, fn) }

// Listen opens a TCP listener inside the node's network namespace.
func (n *Node) Listen(addr string) (net.Listener, error) {
	var l net.Listener
	err := n.InNetNS(func() error {
		var err error
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// DialContext dials from inside the node's network namespace, for an
// http.Transport whose requests must not leave it.
func (n *Node) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.InNetNS(func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Expose makes a server on the host's loopback (hostAddr, 127.0.0.1:P)
// reachable from the node and its pods at BridgeIP:P: it listens there,
// inside the node's network namespace, and copies each connection to
// hostAddr. It returns BridgeIP:P.
func (n *Node) Expose(hostAddr string) (string, error) {
	_, port, err := net.SplitHostPort(hostAddr)
	if err != nil {
		return "", errors.Wrapf(err, errFmtForward, hostAddr)
	}
	l, err := n.Listen(net.JoinHostPort(BridgeIP, port))
	if err != nil {
		return "", errors.Wrapf(err, errFmtForward, hostAddr)
	}
	n.listeners = append(n.listeners, l)
	go forward(l, func() (net.Conn, error) { return net.Dial("tcp", hostAddr) })
	return l.Addr().String(), nil
}

// ExposeDial makes a server that only dial reaches (one in another
// network namespace, say) reachable from the node and its pods: it listens
// at BridgeIP on a free port inside the node's network namespace and
// copies each connection to one dial returns. It returns BridgeIP:P.
func (n *Node) ExposeDial(dial func() (net.Conn, error)) (string, error) {
	l, err := n.Listen(net.JoinHostPort(BridgeIP, "0"))
	if err != nil {
		return "", errors.Wrapf(err, errFmtForward, "a dialled server")
	}
	n.listeners = append(n.listeners, l)
	go forward(l, dial)
	return l.Addr().String(), nil
}

// ExposeToHost makes a server inside the node's network namespace (addr,
// say its loopback's 127.0.0.1:6443) reachable from the host: it listens on
// a free port of the host's loopback and copies each connection to addr,
// dialled inside the namespace. It returns the host's address.
func (n *Node) ExposeToHost(addr string) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", errors.Wrapf(err, errFmtForward, addr)
	}
	n.listeners = append(n.listeners, l)
	go forward(l, func() (net.Conn, error) { return n.DialContext(context.Background(), "tcp", addr) })
	return l.Addr().String(), nil
}

// forward copies each connection l accepts, both ways, to one dial
// returns, until l closes.
func forward(l net.Listener, dial func() (net.Conn, error)) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close() //nolint:errcheck // Either side may close first.
			out, err := dial()
			if err != nil {
				return
			}
			defer out.Close() //nolint:errcheck // Either side may close first.
			go func() { _, _ = io.Copy(out, in); _ = out.(*net.TCPConn).CloseWrite() }()
			_, _ = io.Copy(in, out)
		}()
	}
}

// PodNetNS lists the files of the node's pods' network namespaces. They are
// in the node's own folder (its private /run/netns), which Stop removes,
// never in the host's /run/netns.
func (n *Node) PodNetNS() ([]string, error) {
	d := n.path("mnt", "run_netns")
	ents, err := os.ReadDir(d)
	if err != nil {
		return nil, err
	}
	files := make([]string, 0, len(ents))
	for _, e := range ents {
		files = append(files, filepath.Join(d, e.Name()))
	}
	return files, nil
}
