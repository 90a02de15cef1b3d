/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"github.com/go-logr/logr"
)

// lazyValues is a log sink that keeps the values of WithValues until a
// message is logged. controller-runtime and crossplane-runtime add the
// request, UID, version and external name to their logger on every
// reconcile, and zap encodes them at once: a tenth of the CPU of a
// steady-state poll (docs/bench.md at 22cd24f), for messages that are almost all
// debug messages, not logged without --debug.
type lazyValues struct {
	sink   logr.LogSink
	values []any
}

// withLazyValues returns log with lazy values; its messages report their
// callers as log's would (the frame of lazyValues is skipped).
func withLazyValues(log logr.Logger) logr.Logger {
	sink := log.GetSink()
	if sink == nil {
		return log
	}
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1)
	}
	return logr.New(lazyValues{sink: sink})
}

// Init does nothing: sink comes from a logger, which initialized it.
func (l lazyValues) Init(logr.RuntimeInfo) {}

func (l lazyValues) Enabled(level int) bool { return l.sink.Enabled(level) }

func (l lazyValues) Info(level int, msg string, keysAndValues ...any) {
	l.sink.Info(level, msg, l.with(keysAndValues)...)
}

func (l lazyValues) Error(err error, msg string, keysAndValues ...any) {
	l.sink.Error(err, msg, l.with(keysAndValues)...)
}

func (l lazyValues) WithValues(keysAndValues ...any) logr.LogSink {
	return lazyValues{sink: l.sink, values: l.with(keysAndValues)}
}

func (l lazyValues) WithName(name string) logr.LogSink {
	return lazyValues{sink: l.sink.WithName(name), values: l.values}
}

func (l lazyValues) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := l.sink.(logr.CallDepthLogSink); ok {
		return lazyValues{sink: cd.WithCallDepth(depth), values: l.values}
	}
	return l
}

// with returns the kept values followed by kv, sharing no array with
// either: loggers derived from one another must not overwrite each
// other's values.
func (l lazyValues) with(kv []any) []any {
	if len(l.values) == 0 {
		return kv
	}
	out := make([]any, 0, len(l.values)+len(kv))
	return append(append(out, l.values...), kv...)
}
