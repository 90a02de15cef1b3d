/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package testenv

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// OutsideFailure is what an Outside panics with when a helper fails or skips.
type OutsideFailure struct {
	Msg  string
	Skip bool
}

// Outside lets programs that are not tests (make dev, make bench) use the
// test helpers of internal/testenv: failures and skips panic with an
// OutsideFailure, which the caller recovers into an error, and cleanups run
// at RunCleanups. The embedded interface is nil: helpers call only the
// methods below.
type Outside struct {
	testing.TB

	name     string
	logf     func(format string, args ...any)
	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

// NewOutside returns an Outside named name that logs through logf (or not at
// all when logf is nil).
func NewOutside(name string, logf func(format string, args ...any)) *Outside {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Outside{name: name, logf: logf}
}

func (t *Outside) Helper()                           {}
func (t *Outside) Name() string                      { return t.name }
func (t *Outside) Logf(format string, args ...any)   { t.logf("  "+format, args...) }
func (t *Outside) Log(args ...any)                   { t.logf("  %s", fmt.Sprint(args...)) }
func (t *Outside) Failed() bool                      { return t.failed }
func (t *Outside) Errorf(format string, args ...any) { t.failed = true; t.Logf(format, args...) }
func (t *Outside) Fatalf(format string, args ...any) {
	t.failed = true
	panic(OutsideFailure{Msg: fmt.Sprintf(format, args...)})
}
func (t *Outside) Fatal(args ...any) { t.Fatalf("%s", fmt.Sprint(args...)) }
func (t *Outside) Skipf(format string, args ...any) {
	panic(OutsideFailure{Msg: fmt.Sprintf(format, args...), Skip: true})
}
func (t *Outside) Skip(args ...any) { t.Skipf("%s", fmt.Sprint(args...)) }

// TempDir returns a new folder that RunCleanups removes.
func (t *Outside) TempDir() string {
	d, err := os.MkdirTemp("", t.name+"-")
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// Cleanup registers f to run at RunCleanups.
func (t *Outside) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// RunCleanups runs the cleanups, newest first, once.
func (t *Outside) RunCleanups() {
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
