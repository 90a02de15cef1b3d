/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kube

import (
	"context"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// EventuallyTimeout bounds Eventually. Reconciles take well under a second,
// but replacement and deletion pass the managed reconciler's 30 s creation
// grace period and its per-item backoff, which on a loaded 2-core CI machine
// adds up to minutes; the bound only stops a broken test from hanging.
const EventuallyTimeout = 3 * time.Minute

// RunManager runs a controller manager against e, with the controllers
// setup adds, until the test ends. Controllers poll every second.
func (e *Env) RunManager(t testing.TB, setup func(mgr ctrl.Manager, o controller.Options) error) {
	t.Helper()
	e.RunManagerAs(t, e.Config, setup)
}

// RunManagerAs is RunManager with the manager reaching the API server as
// cfg says: another identity, to test what the provider does without a
// permission.
func (e *Env) RunManagerAs(t testing.TB, cfg *rest.Config, setup func(mgr ctrl.Manager, o controller.Options) error) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  e.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Tests of one package each run a manager with the same controllers.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := controller.Options{
		Logger:                  logging.NewLogrLogger(ctrl.Log),
		MaxConcurrentReconciles: 2,
		PollInterval:            time.Second,
		GlobalRateLimiter:       ratelimiter.NewGlobal(100),
	}
	if err := setup(mgr, o); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// Eventually polls cond until it holds, and fails the test with cond's last
// message after EventuallyTimeout.
func Eventually(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(EventuallyTimeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last seen: %s", what, last)
}
