/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"io"
	"sync"
)

// ClientCache keeps one backend client per provider config, reused across
// reconciles, and rebuilds it when the config or its Secret changes: the
// version passed to Get names both (generation and Secret resource version),
// so rotating a credentials Secret takes effect without a restart.
type ClientCache[V any] struct {
	mu      sync.Mutex
	entries map[string]cacheEntry[V]
}

type cacheEntry[V any] struct {
	version string
	value   V
}

// NewClientCache returns an empty cache.
func NewClientCache[V any]() *ClientCache[V] {
	return &ClientCache[V]{entries: map[string]cacheEntry[V]{}}
}

// Get returns the client cached for key at version, or builds it. A client
// of an older version is closed if it implements io.Closer.
func (c *ClientCache[V]) Get(key, version string, build func() (V, error)) (V, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		if e.version == version {
			return e.value, nil
		}
		closeValue(e.value)
		delete(c.entries, key)
	}
	v, err := build()
	if err != nil {
		return v, err
	}
	c.entries[key] = cacheEntry[V]{version: version, value: v}
	return v, nil
}

// Forget drops and closes the client cached for key, so the next Get
// rebuilds it; for clients whose connection broke.
func (c *ClientCache[V]) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		closeValue(e.value)
		delete(c.entries, key)
	}
}

func closeValue(v any) {
	if cl, ok := v.(io.Closer); ok {
		_ = cl.Close()
	}
}
