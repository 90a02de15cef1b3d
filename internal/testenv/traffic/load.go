/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package traffic

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

const (
	errFmtConnect = "the proxy answered CONNECT with %d"
	errFmtPing    = "GET through the tunnel answered %d"
)

// A Probe is one kind of request a Load sends again and again.
type Probe struct {
	// Name tells the probe's records apart.
	Name string
	// Send sends the request through c.
	Send func(ctx context.Context, c Client) (Result, error)
}

// A Record is the outcome of one request of a Load.
type Record struct {
	// At is when the request was sent.
	At    time.Time
	Probe string
	// Code is the answer's status code, 0 on Err.
	Code int
	Err  error
}

// A Load sends requests through a proxy continuously, bounded in count and
// time, so a test can watch what a change does to traffic that never stops.
// Each request is a new connection, so each is routed (and refused) anew.
type Load struct {
	// Client sends every request.
	Client Client
	// Workers send requests at once; 4 when zero.
	Workers int
	// Every is the pause of a worker between two requests; 200 ms when
	// zero.
	Every time.Duration
	// Max bounds the number of requests; 3000 when zero.
	Max int
	// For bounds the time; 3 minutes when zero.
	For time.Duration
}

func (l Load) defaults() Load {
	if l.Workers == 0 {
		l.Workers = 4
	}
	if l.Every == 0 {
		l.Every = 200 * time.Millisecond
	}
	if l.Max == 0 {
		l.Max = 3000
	}
	if l.For == 0 {
		l.For = 3 * time.Minute
	}
	return l
}

// Run sends the probes in turn until ctx ends, l's bounds are reached, or
// each, called with every record in the order they complete, returns true.
// It returns every record.
func (l Load) Run(ctx context.Context, probes []Probe, each func(Record) bool) []Record {
	l = l.defaults()
	ctx, cancel := context.WithTimeout(ctx, l.For)
	defer cancel()
	var (
		mu      sync.Mutex
		records []Record
		next    int
		wg      sync.WaitGroup
	)
	// take returns the probe to send next, or false once the load is over.
	take := func() (Probe, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next >= l.Max || ctx.Err() != nil {
			return Probe{}, false
		}
		p := probes[next%len(probes)]
		next++
		return p, true
	}
	for range l.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				p, ok := take()
				if !ok {
					return
				}
				r := Record{At: time.Now(), Probe: p.Name}
				res, err := p.Send(ctx, l.Client)
				r.Code, r.Err = res.Code, err
				if ctx.Err() != nil {
					// Cut off by the end of the load, not by the proxy.
					return
				}
				mu.Lock()
				records = append(records, r)
				if each != nil && each(r) {
					cancel()
				}
				mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-time.After(l.Every):
				}
			}
		}()
	}
	wg.Wait()
	return records
}

// A Tunnel is a CONNECT tunnel through the proxy to an origin, with TLS
// inside, kept open: a change of the proxy must not cut it.
type Tunnel struct {
	conn net.Conn
	tls  *tls.Conn
	r    *bufio.Reader
	host string
}

// Tunnel opens a CONNECT tunnel to hostport (an origin's address and TLS
// port) through c's proxy.
func (c Client) Tunnel(ctx context.Context, hostport string) (*Tunnel, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: hostport}, Host: hostport, Header: http.Header{}}
	c.authorize(req.Header)
	if err := req.Write(conn); err != nil {
		_ = conn.Close()
		return nil, errors.Wrap(err, errRequest)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		_ = conn.Close()
		return nil, errors.Wrap(err, errResponse)
	}
	if resp.StatusCode != http.StatusOK {
		_ = conn.Close()
		return nil, errors.Errorf(errFmtConnect, resp.StatusCode)
	}
	host, _, _ := net.SplitHostPort(hostport)
	// The proxy sends nothing after its answer: the reader holds nothing
	// the TLS client would miss.
	tc := tls.Client(conn, &tls.Config{RootCAs: c.Roots, ServerName: host, MinVersion: tls.VersionTLS12})
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return nil, errors.Wrap(err, errTLS)
	}
	return &Tunnel{conn: conn, tls: tc, r: bufio.NewReader(tc), host: hostport}, nil
}

// Ping sends GET / through the tunnel, keeping the connection open, and
// fails unless the origin answers 200 with Body.
func (t *Tunnel) Ping(ctx context.Context) error {
	_ = t.conn.SetDeadline(time.Now().Add(timeout))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+t.host+"/", nil)
	if err != nil {
		return errors.Wrap(err, errRequest)
	}
	if err := req.Write(t.tls); err != nil {
		return errors.Wrap(err, errRequest)
	}
	res, err := read(t.r, req)
	if err != nil {
		return err
	}
	if res.Code != http.StatusOK || res.Body != Body {
		return errors.Errorf(errFmtPing, res.Code)
	}
	return nil
}

// Close closes the tunnel.
func (t *Tunnel) Close() error { return t.conn.Close() }
