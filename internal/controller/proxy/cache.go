/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"io"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
// rebuilds it: for clients whose config was deleted (see Deletions).
func (c *ClientCache[V]) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		closeValue(e.value)
		delete(c.entries, key)
	}
}

// ForgetOn forgets (and closes) the client of every config d reports
// deleted.
func (c *ClientCache[V]) ForgetOn(d *Deletions) { d.Subscribe(c.Forget) }

func closeValue(v any) {
	if cl, ok := v.(io.Closer); ok {
		_ = cl.Close()
	}
}

// Deletions tells the ClientCaches of a backend which provider configs were
// deleted, so each closes the client it holds for them: a deleted config's
// backend kept its informers (all nodes of the target cluster with them),
// its connections and its goroutines until the provider restarted. A config
// that changed needs nothing: its next Get rebuilds and closes the client.
// The zero value is ready; a nil Deletions tells nobody.
type Deletions struct {
	mu     sync.Mutex
	forget []func(key string)
}

// Subscribe calls forget with the cache key (Config.CacheKey) of every
// config deleted from now on; pass ClientCache.Forget.
func (d *Deletions) Subscribe(forget func(key string)) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.forget = append(d.forget, forget)
}

// Deleted tells every subscriber that the config obj was deleted.
func (d *Deletions) Deleted(obj client.Object) {
	if d == nil {
		return
	}
	d.mu.Lock()
	fns := d.forget
	d.mu.Unlock()
	key := Config{Object: obj}.CacheKey()
	for _, fn := range fns {
		fn(key)
	}
}

// handler feeds d the deletions an informer of configs sees, tombstones
// included (a delete missed while the watch was down).
func (d *Deletions) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if o, ok := obj.(client.Object); ok {
			d.Deleted(o)
		}
	}}
}
