/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"io"
	"net"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/rest"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	kubeenv "github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// TestIntegrationUnreachableTarget cuts the target's API server away
// behind a TCP relay: the informers then retry quietly and keep their last
// state, which Observe must not report as the instance's.
func TestIntegrationUnreachableTarget(t *testing.T) {
	env := kubeenv.Shared(t)
	u, err := url.Parse(env.Config.Host)
	step(t, "parse the apiserver URL", err)
	r := newCutRelay(t, u.Host)
	cfg := rest.CopyConfig(env.Config)
	cfg.Host = "https://" + r.addr
	b, err := NewForConfig(cfg)
	step(t, "NewForConfig", err)
	t.Cleanup(func() { _ = b.Close() })
	ctx := t.Context()
	ns := env.Namespace(t, "unreachable")
	d := desired(inNamespace(ns))
	got := make(chan backend.Ownership, 100)
	b.Watch(func(o backend.Ownership) { got <- o })
	step(t, "Create", b.Create(ctx, d))
	markAvailable(ctx, t, env.Client, ns, 2)
	eventually(t, "Observe reads a Ready instance from the cache", func() bool {
		o := observe(ctx, t, b, d)
		return o.Ready && b.watch.reader(objectKey{kind: reflect.TypeOf(&appsv1.Deployment{})}) != b.watch.direct
	})

	r.down()
	cut := time.Now()
	var gotErr error
	eventually(t, "Observe reports the cut", func() bool {
		_, gotErr = b.Observe(ctx, d)
		return gotErr != nil
	})
	took := time.Since(cut)
	t.Logf("Observe reported the cut after %s: %v", took, gotErr)
	if most := liveInterval + liveTimeout + 2*time.Second; took > most {
		t.Errorf("Observe reported the cut after %s, want within %s", took, most)
	}
	if c := backend.ClassOf(gotErr); c != backend.ClassTransient {
		t.Errorf("Observe during the cut: class %s, want %s (%v)", c, backend.ClassTransient, gotErr)
	}
	if !strings.Contains(gotErr.Error(), "the target cluster is unreachable since ") {
		t.Errorf("Observe during the cut: %q does not say the target is unreachable", gotErr)
	}

	drain(got)
	r.up(t)
	restored := time.Now()
	eventually(t, "Observe reports the Ready instance again", func() bool {
		o, err := b.Observe(ctx, d)
		return err == nil && o.Ready
	})
	t.Logf("Observe reported Ready %s after the relay was restored", time.Since(restored))
	// The informers are replaced at once: without that, the cache is read
	// again only catchUp (a minute) after the outage, and every Observe
	// until then reads from the API server.
	eventually(t, "Observe reads from the cache again", func() bool {
		_, err := b.Observe(ctx, d)
		return err == nil && b.watch.reader(objectKey{kind: reflect.TypeOf(&appsv1.Deployment{})}) != b.watch.direct
	})
	t.Logf("the cache was read again %s after the relay was restored", time.Since(restored))
	// Every proxy of the target is observed again once the cache listed:
	// a change during the outage arrives in a list, not as an event.
	select {
	case o := <-got:
		if diff := cmp.Diff(d.Ownership, o); diff != "" {
			t.Errorf("reported after the outage: -want, +got:\n%s", diff)
		}
	case <-time.After(10 * time.Second):
		t.Error("the proxy was not reported within 10 s of the cache listing again")
	}
}

// cutRelay forwards TCP connections from a loopback port to an address;
// down closes the port and every connection, up opens the port again.
type cutRelay struct {
	to, addr string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func newCutRelay(t *testing.T, to string) *cutRelay {
	t.Helper()
	r := &cutRelay{to: to}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	step(t, "listen for the relay", err)
	r.addr, r.ln = ln.Addr().String(), ln
	go r.serve(ln)
	t.Cleanup(r.down)
	return r
}

func (r *cutRelay) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", r.to)
		if err != nil {
			_ = c.Close()
			continue
		}
		r.mu.Lock()
		if r.ln != ln {
			r.mu.Unlock()
			_, _ = c.Close(), up.Close()
			return
		}
		r.conns = append(r.conns, c, up)
		r.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); _, _ = c.Close(), up.Close() }()
		go func() { _, _ = io.Copy(c, up); _, _ = c.Close(), up.Close() }()
	}
}

func (r *cutRelay) down() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		_ = r.ln.Close()
		r.ln = nil
	}
	for _, c := range r.conns {
		_ = c.Close()
	}
	r.conns = nil
}

func (r *cutRelay) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", r.addr)
	step(t, "listen for the relay again", err)
	r.mu.Lock()
	r.ln = ln
	r.mu.Unlock()
	go r.serve(ln)
}
