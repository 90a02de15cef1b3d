/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package testenv

import (
	"os"
	"runtime"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"golang.org/x/sys/unix"
)

const (
	errOpenNetNS = "cannot open the network namespace"
	errSetNetNS  = "cannot enter the network namespace"
)

// InNetNS runs fn on an OS thread that has entered the network namespace at
// path. Sockets fn opens (listeners, connections) stay in that namespace
// for their whole life, whichever goroutine uses them later; goroutines fn
// starts run outside it.
func InNetNS(path string, fn func() error) error {
	target, err := os.Open(path) //nolint:gosec // A namespace the caller names.
	if err != nil {
		return errors.Wrap(err, errOpenNetNS)
	}
	defer target.Close() //nolint:errcheck // Read-only.
	runtime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return errors.Wrap(err, errOpenNetNS)
	}
	defer self.Close() //nolint:errcheck // Read-only.
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return errors.Wrap(err, errSetNetNS)
	}
	// A thread that cannot go back stays locked: Go then ends it with the
	// goroutine instead of reusing it in the wrong namespace. Going back
	// matters: a child started with Pdeathsig dies with the thread that
	// started it.
	defer func() {
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return fn()
}
