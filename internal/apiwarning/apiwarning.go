/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package apiwarning logs the warnings API servers send with their
// responses, each distinct warning once.
//
// client-go's default, controller-runtime's logger without deduplication,
// logs every one: the API server warns about crossplane-runtime's finalizer
// name (not domain-qualified) on every write of a managed resource that
// carries it, so 1000 new proxies logged the same line 1000 times. And a
// target cluster is any API server a namespaced ProviderConfig names:
// whatever it sends is bounded here, in length and in what is remembered.
package apiwarning

import (
	"context"
	"sync"
	"unicode/utf8"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

const (
	// remember is how many distinct warnings a Logger keeps; once full it
	// forgets them all, so a server sending a new one with every response
	// costs log lines, never memory.
	remember = 64
	// maxLen bounds a warning as logged, and as remembered.
	maxLen = 512
)

// A Logger logs each distinct warning of the API server it is set on once,
// with the values it was made with. It is a rest.WarningHandlerWithContext.
type Logger struct {
	values []any

	mu   sync.Mutex
	seen map[string]struct{}
}

// NewLogger returns a Logger that logs each warning with keysAndValues.
func NewLogger(keysAndValues ...any) *Logger {
	return &Logger{values: keysAndValues, seen: map[string]struct{}{}}
}

// HandleWarningHeaderWithContext logs a warning (code 299) that it has not
// logged since it last forgot. The logger is the context's: a reconcile's
// names the resource whose request was warned about.
func (l *Logger) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, message string) {
	if code != 299 || message == "" {
		return
	}
	if len(message) > maxLen {
		i := maxLen
		for i > 0 && !utf8.RuneStart(message[i]) {
			i--
		}
		message = message[:i] + "..."
	}
	if !l.first(message) {
		return
	}
	log.FromContext(ctx).Info("Warning from the API server", append([]any{"warning", message}, l.values...)...)
}

func (l *Logger) first(message string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[message]; ok {
		return false
	}
	if len(l.seen) >= remember {
		clear(l.seen)
	}
	l.seen[message] = struct{}{}
	return true
}
