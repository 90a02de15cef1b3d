/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"

	"github.com/egressproxy/provider-egressproxy/internal/exepages"
)

// startupPages releases the startup pages once the manager's caches have
// synced: by then every package's init has run and the informers have
// listed, and what the controllers use maps itself back.
type startupPages struct {
	cache interface {
		WaitForCacheSync(ctx context.Context) bool
	}
	log logging.Logger
}

// NeedLeaderElection is false: a standby replica holds the same pages.
func (startupPages) NeedLeaderElection() bool { return false }

func (s startupPages) Start(ctx context.Context) error {
	if !s.cache.WaitForCacheSync(ctx) {
		return nil
	}
	n, err := exepages.Release()
	if err != nil {
		// Only memory is at stake: say so and go on.
		s.log.Info("Cannot release the binary's startup pages", "error", err)
		return nil
	}
	s.log.Debug("Released the binary's startup pages", "bytes", n)
	return nil
}
