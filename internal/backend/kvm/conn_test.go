/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/libvirttest"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// go-libvirt's libvirttest answers the connection handshake and a few
// calls, and never answers the rest (ConnectGetType, DomainCreate): a daemon
// that hangs, as a wedged libvirtd or a dead SSH link would.

const (
	hangTimeout = 300 * time.Millisecond
	// hangSlack is how long past its deadline a call may take to return.
	hangSlack = 5 * time.Second
)

func TestDialBoundedByContext(t *testing.T) {
	c := NewConn(libvirttest.New(), golibvirt.QEMUSystem)
	defer c.Close() //nolint:errcheck // Test.
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	start := time.Now()
	_, err := rpc{c: c}.DomainLookupByName(ctx, "x")
	if !errors.Is(err, context.DeadlineExceeded) || backend.ClassOf(classify(err)) != backend.ClassTransient {
		t.Errorf("a dial that hangs: want a Transient deadline error, got %v", err)
	}
	if took := time.Since(start); took > hangTimeout+hangSlack {
		t.Errorf("the call returned %s after its deadline", took-hangTimeout)
	}
}

func TestCallBoundedByContext(t *testing.T) {
	c := NewConn(libvirttest.New(), golibvirt.QEMUSystem)
	defer c.Close() //nolint:errcheck // Test.
	// Connect by hand: the mock never answers ConnectGetType.
	r := &recorder{d: libvirttest.New()}
	l := golibvirt.NewWithDialer(r)
	if err := l.ConnectToURI(golibvirt.QEMUSystem); err != nil {
		t.Fatal(err)
	}
	s := &session{l: l, raw: r, driver: DriverQEMU}
	c.cur = s

	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	start := time.Now()
	err := rpc{c: c}.DomainCreate(ctx, golibvirt.Domain{Name: "x"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call the daemon never answers: want a deadline error, got %v", err)
	}
	if took := time.Since(start); took > hangTimeout+hangSlack {
		t.Errorf("the call returned %s after its deadline", took-hangTimeout)
	}
	c.mu.Lock()
	dropped := c.cur == nil
	c.mu.Unlock()
	if !dropped {
		t.Error("the session of a call that outlived its context was kept")
	}
	select {
	case <-l.Disconnected():
	case <-time.After(hangSlack):
		t.Error("the dropped session's socket was not closed")
	}
}

func TestClosedConn(t *testing.T) {
	c := NewConn(libvirttest.New(), golibvirt.QEMUSystem)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	if _, err := (rpc{c: c}).Driver(ctx); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call on a closed connection: want an immediate error, got %v", err)
	}
}
