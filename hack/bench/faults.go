/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// A fault breaks a backend for a while (-faults): begin starts it, end
// ends it. Requests to target are what it shows.
type fault struct {
	name   string
	target string
	begin  func() error
	end    func() error
}

// A faulter is a bench with fault runs.
type faulter interface {
	faults() []fault
}

// faultResult is what one fault run shows.
type faultResult struct {
	name   string
	target string
	// during and after: requests to target while the fault lasted, and
	// from its end until every MR was Synced and Ready again.
	during, after counts
	lasted        time.Duration
	// unsynced is how many MRs were not Synced when the fault ended.
	unsynced int
	recovery time.Duration
	load     string
	note     string
}

// faultRun runs f against the steady provider: it counts requests while the
// fault lasts (-fault-for) and times how long after its end every MR is
// Synced and Ready again.
func (r *runner) faultRun(ctx context.Context, e *env, b bench, p *process, f fault) (faultResult, error) {
	fr := faultResult{name: f.name, target: f.target}
	logf("%s: fault %q for %s", r.backend, f.name, r.o.faultFor)
	before, err := r.counts(ctx, e, b, p)
	if err != nil {
		return fr, err
	}
	start := time.Now()
	if err := f.begin(); err != nil {
		return fr, errors.Wrapf(err, "cannot begin the fault %q", f.name)
	}
	select {
	case <-time.After(r.o.faultFor):
	case <-ctx.Done():
		_ = f.end()
		return fr, ctx.Err()
	}
	// Count before the fault ends: the first calls after it are recovery.
	atEnd, err := r.counts(ctx, e, b, p)
	if err != nil {
		_ = f.end()
		return fr, err
	}
	if err := f.end(); err != nil {
		return fr, errors.Wrapf(err, "cannot end the fault %q", f.name)
	}
	fr.lasted, fr.during = time.Since(start), atEnd.minus(before).only(f.target)
	ended := time.Now()
	var first bool
	deadline := ended.Add(r.o.timeout)
	for time.Now().Before(deadline) {
		synced, ready, err := countConditions(ctx, e.mrs, b.gvk())
		if err == nil {
			if !first {
				first, fr.unsynced = true, r.o.n-synced
			}
			if synced == r.o.n && ready == r.o.n {
				fr.recovery = time.Since(ended)
				after, err := r.counts(ctx, e, b, p)
				if err != nil {
					return fr, err
				}
				fr.after, fr.load = after.minus(atEnd).only(f.target), loadAvg()
				return fr, nil
			}
		}
		select {
		case <-p.done:
			return fr, errors.Errorf("the provider exited (log: %s)", p.logPath)
		case <-ctx.Done():
			return fr, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	fr.note = fmt.Sprintf("not every MR was Synced and Ready %s after the fault ended", r.o.timeout)
	fr.load = loadAvg()
	return fr, nil
}

// only keeps the requests to target.
func (c counts) only(target string) counts {
	out := counts{}
	for k, v := range c {
		if k.target == target {
			out[k] = v
		}
	}
	return out
}

func (fr faultResult) print(w io.Writer, n int) {
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	p("\n### fault: %s, %s (load average %s after)\n\n", fr.name, secs(fr.lasted), fr.load)
	if fr.note != "" {
		p("not complete: %s\n\n", fr.note)
	}
	mins := fr.lasted.Minutes()
	p("| figure | value |\n|---|---|\n")
	p("| %s requests per MR per minute during the fault | %s |\n", fr.target, num(fr.during.total()/float64(n)/mins))
	p("| MRs not Synced when the fault ended | %d/%d |\n", fr.unsynced, n)
	p("| time to all Synced and Ready after the fault ended | %s |\n", secs(fr.recovery))
	p("| %s requests per MR until then | %s |\n", fr.target, num(fr.after.total()/float64(n)))
	for _, k := range sortedKeys(fr.during, fr.after) {
		p("| %s %s: per MR per minute during, per MR after | %s, %s |\n", k.target, k.verb, num(fr.during[k]/float64(n)/mins), num(fr.after[k]/float64(n)))
	}
}

// relay forwards TCP connections from a loopback port to an address; down
// closes the port and every connection, up opens it again. It stands
// between the provider and the target cluster, so that the target
// apiserver can be "down" while the control plane, the same apiserver
// under another address, stays up. TLS passes through untouched.
type relay struct {
	to, addr string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

func newRelay(to string) (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, errors.Wrap(err, "cannot listen for the relay")
	}
	r := &relay{to: to, addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]bool{}}
	go r.serve(ln)
	return r, nil
}

// port is the relay's port.
func (r *relay) port() string {
	_, port, _ := net.SplitHostPort(r.addr)
	return port
}

func (r *relay) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go r.pipe(c)
	}
}

func (r *relay) pipe(c net.Conn) {
	up, err := net.Dial("tcp", r.to)
	if err != nil {
		_ = c.Close()
		return
	}
	if !r.track(c, up) {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	_, _ = c.Close(), up.Close()
	r.mu.Lock()
	delete(r.conns, c)
	delete(r.conns, up)
	r.mu.Unlock()
}

// track records a connection pair, or closes it when the relay is down.
func (r *relay) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln == nil {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		r.conns[c] = true
	}
	return true
}

// down refuses new connections and cuts the open ones.
func (r *relay) down() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		_ = r.ln.Close()
		r.ln = nil
	}
	for c := range r.conns {
		_ = c.Close()
	}
	clear(r.conns)
	return nil
}

// up accepts connections again, on the same port.
func (r *relay) up() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		return errors.Wrap(err, "cannot listen for the relay again")
	}
	r.ln = ln
	go r.serve(ln)
	return nil
}
