/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket"
)

const (
	errConnClosed = "the libvirt connection was closed"
	errConnect    = "cannot connect to libvirt"
	errDriverType = "cannot read the libvirt driver type"

	// closeTimeout bounds the polite goodbye of Close; after it the socket
	// is simply closed.
	closeTimeout = 5 * time.Second
)

// Conn is one pooled connection to a libvirt daemon, shared by every
// reconcile of a provider config. It dials lazily, and dials again when the
// connection broke (Disconnected fired, a call failed with a transport
// error, or a call outlived its context).
//
// go-libvirt takes no context, so every call runs on its own goroutine and
// the caller waits for it or for ctx. When ctx ends first, the connection is
// closed: that is the only way to release a call the daemon never answers,
// and a call that outlives a reconcile means the daemon or the link is
// wedged. Connection deadlines do not fit: go-libvirt multiplexes all calls
// over one socket read by one goroutine, so a read deadline would kill an
// idle connection and every call on it, and SSH channels have no deadlines.
// Uploads run on a connection of their own (see doOnce).
type Conn struct {
	dialer socket.Dialer
	uri    golibvirt.ConnectURI

	// sem serialises dialling while letting waiters honour their ctx.
	sem chan struct{}

	mu     sync.Mutex
	cur    *session
	closed bool
}

// session is one live connection.
type session struct {
	l *golibvirt.Libvirt
	// raw holds the socket, closed to drop the session at once: go-libvirt's
	// Disconnect makes an RPC first, which a wedged daemon never answers.
	raw *recorder
	// driver is what ConnectGetType said: "QEMU", "Test".
	driver string
}

// NewConn returns a connection that dials d and opens uri on first use.
func NewConn(d socket.Dialer, uri golibvirt.ConnectURI) *Conn {
	return &Conn{dialer: d, uri: uri, sem: make(chan struct{}, 1)}
}

// recorder remembers the socket it dialled, so a session, or a dial that
// hangs, can be dropped.
type recorder struct {
	d      socket.Dialer
	mu     sync.Mutex
	conn   net.Conn
	closed bool
}

func (r *recorder) Dial() (net.Conn, error) {
	c, err := r.d.Dial()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil && r.closed {
		_ = c.Close()
		return nil, errors.New(errConnClosed)
	}
	r.conn = c
	return c, err
}

// close closes the socket, now or as soon as it is dialled.
func (r *recorder) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.conn != nil {
		_ = r.conn.Close()
	}
}

// session returns the live session, dialling when there is none.
func (c *Conn) session(ctx context.Context) (*session, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, errors.Wrap(ctx.Err(), errConnect)
	}
	defer func() { <-c.sem }()
	c.mu.Lock()
	s, closed := c.cur, c.closed
	c.mu.Unlock()
	if closed {
		return nil, errors.New(errConnClosed)
	}
	if s != nil && s.l.IsConnected() {
		return s, nil
	}
	if s != nil {
		c.drop(s)
	}
	s, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		s.raw.close()
		return nil, errors.New(errConnClosed)
	}
	c.cur = s
	return s, nil
}

// dial connects in the background and gives up when ctx ends, closing the
// socket so the background work ends too.
func (c *Conn) dial(ctx context.Context) (*session, error) {
	type result struct {
		s   *session
		err error
	}
	ch := make(chan result, 1)
	r := &recorder{d: c.dialer}
	go func() {
		l := golibvirt.NewWithDialer(r)
		if err := l.ConnectToURI(c.uri); err != nil {
			ch <- result{err: errors.Wrap(err, errConnect)}
			return
		}
		s := &session{l: l, raw: r}
		typ, err := l.ConnectGetType()
		if err != nil {
			r.close()
			ch <- result{err: errors.Wrap(err, errDriverType)}
			return
		}
		s.driver = typ
		ch <- result{s: s}
	}()
	select {
	case r := <-ch:
		return r.s, r.err
	case <-ctx.Done():
		r.close()
		return nil, errors.Wrap(ctx.Err(), errConnect)
	}
}

// drop closes s and forgets it, so the next call dials again.
func (c *Conn) drop(s *session) {
	c.mu.Lock()
	if c.cur == s {
		c.cur = nil
	}
	c.mu.Unlock()
	s.raw.close()
}

// Close closes the connection; later calls fail. The cache of provider
// configs calls it when the config or its Secret changed.
func (c *Conn) Close() error {
	c.mu.Lock()
	s := c.cur
	c.cur, c.closed = nil, true
	c.mu.Unlock()
	if s == nil {
		return nil
	}
	done := make(chan struct{})
	go func() {
		_ = s.l.Disconnect()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeTimeout):
	}
	s.raw.close()
	return nil
}

// do runs fn on the live session, bounded by ctx (see Conn).
func do[T any](ctx context.Context, c *Conn, fn func(*golibvirt.Libvirt) (T, error)) (T, error) {
	var zero T
	s, err := c.session(ctx)
	if err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := fn(s.l)
		ch <- result{v: v, err: err}
	}()
	select {
	case r := <-ch:
		if r.err != nil && (connectionLost(r.err) || !s.l.IsConnected()) {
			c.drop(s)
		}
		return r.v, r.err
	case <-ctx.Done():
		c.drop(s)
		return zero, ctx.Err()
	}
}

// driver returns the driver type of the live session.
func (c *Conn) driver(ctx context.Context) (string, error) {
	s, err := c.session(ctx)
	if err != nil {
		return "", err
	}
	return s.driver, nil
}

// doOnce runs fn on a connection of its own, closed afterwards. Uploads use
// it: go-libvirt's stream code can wedge the reader of the connection it
// runs on, which must never be the shared one.
func doOnce(ctx context.Context, c *Conn, fn func(*golibvirt.Libvirt) error) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return errors.New(errConnClosed)
	}
	s, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer s.raw.close()
	ch := make(chan error, 1)
	go func() { ch <- fn(s.l) }()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
