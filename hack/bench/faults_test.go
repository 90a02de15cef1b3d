/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// TestRelay shows that the relay forwards, refuses and cuts connections
// while down, and forwards again on the same port once up.
func TestRelay(t *testing.T) {
	// An echo server stands in for the apiserver.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() //nolint:errcheck // Test.
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	r, err := newRelay(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer r.down() //nolint:errcheck // Test.
	echo := func(c net.Conn) error {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return err
		}
		_, err := bufio.NewReader(c).ReadString('\n')
		return err
	}
	open, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := echo(open); err != nil {
		t.Fatalf("through the relay: %v", err)
	}
	if err := r.down(); err != nil {
		t.Fatal(err)
	}
	if err := echo(open); err == nil {
		t.Error("a connection open before down still works after it")
	}
	if c, err := net.Dial("tcp", r.addr); err == nil {
		_ = c.Close()
		t.Error("a new connection is accepted while down")
	}
	if err := r.up(); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatalf("after up: %v", err)
	}
	defer c.Close() //nolint:errcheck // Test.
	if err := echo(c); err != nil {
		t.Errorf("through the relay after up: %v", err)
	}
}
