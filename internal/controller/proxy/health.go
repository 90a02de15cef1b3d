/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"fmt"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// TypeHealthy is the provider config condition that says whether its
// backend answers and its credentials work.
const TypeHealthy xpv2.ConditionType = "Healthy"

// ReasonHealthCheckUnsupported is the Healthy=Unknown reason of a config
// whose backend has no health check: nothing was checked, so claiming
// Healthy=True would be a lie a platform engineer might rely on.
const ReasonHealthCheckUnsupported xpv2.ConditionReason = "HealthCheckUnsupported"

const msgFmtNoHealthCheck = "the %s backend has no health check; the config's credentials are only tried when a proxy is reconciled"

// HealthReporter checks the backend of every provider config at start-up
// and then periodically, and shows the result as the config's Healthy
// condition: a broken credential shows on the config before any proxy
// fails. A check never fails as a whole; each config gets its own answer.
type HealthReporter[P, O any] struct {
	kube       client.Client
	newBackend BackendFactory[P, O]
	newConfigs func() (pcs, cpcs client.ObjectList)
	instr      *backend.Instrumentation
	name       string
	interval   time.Duration
	timeout    time.Duration
	log        logging.Logger
}

// NewHealthReporter returns a HealthReporter for the configs of one group.
func NewHealthReporter[P, O any](c CollectorConfig[P, O], backendName string, o Options) *HealthReporter[P, O] {
	i := o.Instrumentation
	if i == nil {
		i = backend.NewInstrumentation()
	}
	return &HealthReporter[P, O]{
		kube: c.Kube, newBackend: c.NewBackend, newConfigs: c.NewConfigs, instr: i, name: backendName,
		interval: o.HealthInterval, timeout: 30 * time.Second, log: o.Logger,
	}
}

// NeedLeaderElection makes only the leader check.
func (h *HealthReporter[P, O]) NeedLeaderElection() bool { return true }

// Start checks at once, then every interval until ctx is done.
func (h *HealthReporter[P, O]) Start(ctx context.Context) error {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		h.CheckAll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// CheckAll checks every config and records the result on it.
func (h *HealthReporter[P, O]) CheckAll(ctx context.Context) {
	pcs, cpcs := h.newConfigs()
	var cfgs []Config
	for _, l := range []client.ObjectList{pcs, cpcs} {
		if err := h.kube.List(ctx, l); err != nil {
			h.log.Info("Cannot list provider configs for health checks", "error", err)
			return
		}
		_ = listObjects(l, func(o client.Object) {
			cfgs = append(cfgs, Config{Object: o, SecretNamespace: o.GetNamespace()})
		})
	}
	for _, cfg := range cfgs {
		h.record(ctx, cfg, h.check(ctx, cfg))
	}
}

// check returns the Healthy condition of cfg.
func (h *HealthReporter[P, O]) check(ctx context.Context, cfg Config) xpv2.Condition {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	c := xpv2.Condition{Type: TypeHealthy, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
		Reason: xpv2.ConditionReason(backend.ClassNone.Reason())}
	b, err := h.newBackend(ctx, h.kube, cfg)
	if err == nil {
		hc, ok := b.(backend.HealthChecker)
		if !ok {
			c.Status, c.Reason, c.Message = corev1.ConditionUnknown, ReasonHealthCheckUnsupported, fmt.Sprintf(msgFmtNoHealthCheck, h.name)
			return c
		}
		err = h.instr.CheckHealth(ctx, h.name, hc)
	}
	if err != nil {
		c.Status, c.Reason, c.Message = corev1.ConditionFalse, xpv2.ConditionReason(backend.ClassOf(err).Reason()), err.Error()
	}
	return c
}

func (h *HealthReporter[P, O]) record(ctx context.Context, cfg Config, c xpv2.Condition) {
	pc, ok := cfg.Object.(resource.ProviderConfig)
	if !ok {
		return
	}
	before, ok := pc.DeepCopyObject().(client.Object)
	if !ok {
		return
	}
	if pc.GetCondition(TypeHealthy).Equal(c) {
		return
	}
	pc.SetConditions(c)
	if err := h.kube.Status().Patch(ctx, pc, client.MergeFrom(before)); err != nil {
		h.log.Debug("Cannot record the health of a provider config", "error", err)
	}
}
