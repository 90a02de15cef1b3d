/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package controller registers every controller of the provider.
package controller

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/egressproxy/provider-egressproxy/internal/controller/config"
	"github.com/egressproxy/provider-egressproxy/internal/controller/gcpproxy"
	"github.com/egressproxy/provider-egressproxy/internal/controller/kubernetesproxy"
	"github.com/egressproxy/provider-egressproxy/internal/controller/kvmproxy"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
)

// Backends are the backend factories built into the provider. A nil factory
// still registers its controller, whose resources then say the backend is
// missing.
type Backends struct {
	Kubernetes kubernetesproxy.BackendFactory
	GCP        gcpproxy.BackendFactory
	KVM        kvmproxy.BackendFactory
}

// Setup adds every controller to mgr.
func Setup(mgr ctrl.Manager, o proxy.Options, b Backends) error {
	if err := config.Setup(mgr, o.Options); err != nil {
		return err
	}
	if err := kubernetesproxy.Setup(mgr, o, b.Kubernetes); err != nil {
		return err
	}
	if err := gcpproxy.Setup(mgr, o, b.GCP); err != nil {
		return err
	}
	return kvmproxy.Setup(mgr, o, b.KVM)
}
