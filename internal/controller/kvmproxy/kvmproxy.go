/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package kvmproxy is the controller side of the kvm backend: Controller,
// from which package proxy builds the controllers, the backend's provider
// flags, and the factory that builds the backend from a provider config.
package kvmproxy

import (
	"strings"

	"github.com/alecthomas/kingpin/v2"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/kvmdesc"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
)

type (
	// Backend is the kvm backend as the controller sees it.
	Backend = backend.Backend[v1alpha1.KVMProxyParameters, v1alpha1.KVMProxyObservation]
	// BackendFactory builds the backend for a provider config.
	BackendFactory = proxy.BackendFactory[v1alpha1.KVMProxyParameters, v1alpha1.KVMProxyObservation]
)

// Provider flags of the kvm backend.
const (
	FlagServeProbe  = "kvm-serve-probe"
	FlagBootDevices = "kvm-boot-devices"
)

// Controller is the controller side of the kvm backend.
var Controller = proxy.Controller[*v1alpha1.KVMProxy, v1alpha1.KVMProxyParameters, v1alpha1.KVMProxyObservation]{
	Backend: kvmdesc.Backend,
	Kind: proxy.KindOf(
		func(mg *v1alpha1.KVMProxy) v1alpha1.KVMProxyParameters { return mg.Spec.ForProvider },
		func(p v1alpha1.KVMProxyParameters) commonv1alpha1.ProxyParameters { return p.ProxyParameters },
		func(mg *v1alpha1.KVMProxy, o v1alpha1.KVMProxyObservation, c commonv1alpha1.ProxyObservation) {
			o.ProxyObservation = c
			mg.Status.AtProvider = o
		},
		kvmdesc.Backend.MaxNameLength),
	Factory: flags,
}

// flags declares the kvm backend's provider flags.
func flags(app *kingpin.Application) func(proxy.Env) BackendFactory {
	probe := app.Flag(FlagServeProbe, "Report a KVM proxy Ready only when squid in the guest serves the rendered configuration, probed through the QEMU guest agent (the base image needs qemu-guest-agent, as hack/guest-image.sh builds it). Off: Ready means running with a DHCP lease.").Default("true").Bool()
	boot := app.Flag(FlagBootDevices, "Boot order of KVM proxies, such as hd or network,hd (a blank test image only gets a DHCP lease by network boot).").Default("").String()
	return func(env proxy.Env) BackendFactory {
		var opts []kvm.Option
		if devs := splitList(*boot); len(devs) > 0 {
			opts = append(opts, kvm.WithBootDevices(devs...))
		}
		if *probe {
			opts = append(opts, kvm.WithServeProbe())
		}
		return newFactory(env.Deletions, opts...)
	}
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
