/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"time"

	"k8s.io/client-go/rest"

	"github.com/egressproxy/provider-egressproxy/internal/backend/libvirt"
	controllers "github.com/egressproxy/provider-egressproxy/internal/controller"
	"github.com/egressproxy/provider-egressproxy/internal/controller/gcpproxy"
	"github.com/egressproxy/provider-egressproxy/internal/controller/kubernetesproxy"
	"github.com/egressproxy/provider-egressproxy/internal/controller/kvmproxy"
)

// backends returns the backends built into this provider binary. self is
// the provider's own API server config: a ClusterProviderConfig with
// InjectedIdentity targets that cluster (in a pod, the in-cluster config;
// outside, what KUBECONFIG says, as make dev runs it).
// kvmBoot overrides the boot order of KVM proxies when not empty;
// kvmProbe makes a KVM proxy Ready only when squid in the guest serves.
func backends(self *rest.Config, callTimeout time.Duration, kvmBoot []string, kvmProbe bool) controllers.Backends {
	var kvmOpts []libvirt.Option
	if len(kvmBoot) > 0 {
		kvmOpts = append(kvmOpts, libvirt.WithBootDevices(kvmBoot...))
	}
	if kvmProbe {
		kvmOpts = append(kvmOpts, libvirt.WithServeProbe())
	}
	return controllers.Backends{
		Kubernetes: kubernetesproxy.NewFactory(
			kubernetesproxy.WithInjectedConfig(self),
			kubernetesproxy.WithCallTimeout(callTimeout),
		),
		GCP: gcpproxy.NewFactory(gcpproxy.WithCallTimeout(callTimeout)),
		KVM: kvmproxy.NewFactory(kvmOpts...),
	}
}
