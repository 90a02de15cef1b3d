/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package traffic

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

const (
	errResolve  = "cannot resolve the proxy's address"
	errDial     = "cannot connect to the proxy"
	errRequest  = "cannot send the request"
	errResponse = "cannot read the response"
	errTLS      = "TLS through the tunnel failed"
	timeout     = 20 * time.Second
)

// A Client sends requests through a proxy, from inside a network namespace,
// and reports the status code it got. It speaks HTTP/1.1 itself so that a
// refused CONNECT is a status code too, not an error.
type Client struct {
	// NetNS is the path of the network namespace the client's sockets
	// live in; empty: this process's own (loopback tests).
	NetNS string
	// Proxy is the proxy's URL, as the claim's connection Secret has it;
	// its user, when set, is sent as Proxy-Authorization.
	Proxy *url.URL
	// Resolve maps the proxy's host:port onto one to dial, for a name the
	// namespace cannot resolve (a Service's). Nil dials the URL's host.
	Resolve func(ctx context.Context, hostport string) (string, error)
	// Source is the address to send from; empty lets the kernel choose.
	Source string
	// Roots verify the origin's certificate through CONNECT.
	Roots *x509.CertPool
}

// A Result is the status code and body of an answer: the proxy's own when
// it refused, the origin's when it forwarded.
type Result struct {
	Code int
	Body string
}

func (r Result) String() string { return fmt.Sprintf("%d %.80q", r.Code, r.Body) }

// As returns the client with other credentials (nil: none).
func (c Client) As(user *url.Userinfo) Client {
	p := *c.Proxy
	p.User = user
	c.Proxy = &p
	return c
}

// From returns the client sending from another source address.
func (c Client) From(source string) Client {
	c.Source = source
	return c
}

// Get sends GET target (http://host/...) through the proxy.
func (c Client) Get(ctx context.Context, target string) (Result, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return Result{}, err
	}
	defer conn.Close() //nolint:errcheck // Read to the end below.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return Result{}, errors.Wrap(err, errRequest)
	}
	c.authorize(req.Header)
	req.Close = true
	if err := req.WriteProxy(conn); err != nil {
		return Result{}, errors.Wrap(err, errRequest)
	}
	return read(bufio.NewReader(conn), req)
}

// Connect tunnels to hostport (an IP address and port) with CONNECT, and
// sends GET / over TLS through the tunnel when the proxy lets it through.
func (c Client) Connect(ctx context.Context, hostport string) (Result, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return Result{}, err
	}
	defer conn.Close() //nolint:errcheck // Read to the end below.
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: hostport}, Host: hostport, Header: http.Header{}}
	c.authorize(req.Header)
	if err := req.Write(conn); err != nil {
		return Result{}, errors.Wrap(err, errRequest)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return Result{}, errors.Wrap(err, errResponse)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return Result{Code: resp.StatusCode, Body: string(body)}, nil
	}
	host, _, _ := net.SplitHostPort(hostport)
	tc := tls.Client(conn, &tls.Config{RootCAs: c.Roots, ServerName: host, MinVersion: tls.VersionTLS12})
	if err := tc.HandshakeContext(ctx); err != nil {
		return Result{}, errors.Wrap(err, errTLS)
	}
	get, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+hostport+"/", nil)
	if err != nil {
		return Result{}, errors.Wrap(err, errRequest)
	}
	get.Close = true
	if err := get.Write(tc); err != nil {
		return Result{}, errors.Wrap(err, errRequest)
	}
	return read(bufio.NewReader(tc), get)
}

func (c Client) authorize(h http.Header) {
	if c.Proxy.User == nil {
		return
	}
	pw, _ := c.Proxy.User.Password()
	h.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(c.Proxy.User.Username()+":"+pw)))
}

func (c Client) dial(ctx context.Context) (net.Conn, error) {
	addr := c.Proxy.Host
	if c.Resolve != nil {
		a, err := c.Resolve(ctx, addr)
		if err != nil {
			return nil, errors.Wrap(err, errResolve)
		}
		addr = a
	}
	d := &net.Dialer{Timeout: timeout}
	if c.Source != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(c.Source)}
	}
	var conn net.Conn
	dial := func() (err error) {
		conn, err = d.DialContext(ctx, "tcp", addr)
		return err
	}
	var err error
	if c.NetNS == "" {
		err = dial()
	} else {
		err = testenv.InNetNS(c.NetNS, dial)
	}
	if err != nil {
		return nil, errors.Wrap(err, errDial)
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	return conn, nil
}

func read(r *bufio.Reader, req *http.Request) (Result, error) {
	resp, err := http.ReadResponse(r, req)
	if err != nil {
		return Result{}, errors.Wrap(err, errResponse)
	}
	defer resp.Body.Close() //nolint:errcheck // Read-only.
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return Result{Code: resp.StatusCode, Body: string(body)}, errors.Wrap(err, errResponse)
}
