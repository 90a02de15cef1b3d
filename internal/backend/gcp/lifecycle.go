/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"sync"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

const errClosed = "the backend was closed because its provider config or credentials changed; retrying with the new ones"

// lifecycle closes the clients once the backend is closed and no call is
// using them. A REST client's Close drops its HTTP client, and a call
// racing with it would panic: the factory's cache closes a backend when
// its config changes, while another reconcile may still be using it.
type lifecycle struct {
	mu     sync.Mutex
	active int
	closed bool
	done   bool
	close  func() error
}

// acquire marks a call in flight; it fails once the backend is closed.
func (l *lifecycle) acquire() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return backend.Transient(errors.New(errClosed))
	}
	l.active++
	return nil
}

// release ends a call, and closes the clients if it was the last one of a
// closed backend.
func (l *lifecycle) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active--
	l.finish()
}

// shutdown closes the backend: now when no call is in flight, else when the
// last one ends. It never waits.
func (l *lifecycle) shutdown() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return l.finish()
}

func (l *lifecycle) finish() error {
	if !l.closed || l.active > 0 || l.done {
		return nil
	}
	l.done = true
	return l.close()
}
