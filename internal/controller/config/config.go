/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package config runs the controllers that count the users of every
// ProviderConfig and ClusterProviderConfig, so a config in use cannot be
// deleted, and keeps a namespaced config and its credentials Secret until
// the managed resources that need them are gone.
package config

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/providerconfig"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gcpv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	kubernetesv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	kvmv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
)

// group is what a usage-counting controller needs to know of one API group.
type group struct {
	providerConfig        schema.GroupVersionKind
	clusterProviderConfig schema.GroupVersionKind
	usage                 schema.GroupVersionKind
	usageList             schema.GroupVersionKind
	newProviderConfig     func() client.Object
	newClusterConfig      func() client.Object
	newUsage              func() client.Object
	newManaged            func() client.Object
	newManagedList        func() resource.ManagedList
	newProviderConfigList func() client.ObjectList
	// secretName is the Secret a namespaced ProviderConfig reads from its
	// own namespace, or "".
	secretName func(client.Object) string
}

func groups() []group {
	return []group{
		{
			providerConfig:        kubernetesv1alpha1.ProviderConfigGroupVersionKind,
			clusterProviderConfig: kubernetesv1alpha1.ClusterProviderConfigGroupVersionKind,
			usage:                 kubernetesv1alpha1.ProviderConfigUsageGroupVersionKind,
			usageList:             kubernetesv1alpha1.ProviderConfigUsageListGroupVersionKind,
			newProviderConfig:     func() client.Object { return &kubernetesv1alpha1.ProviderConfig{} },
			newClusterConfig:      func() client.Object { return &kubernetesv1alpha1.ClusterProviderConfig{} },
			newUsage:              func() client.Object { return &kubernetesv1alpha1.ProviderConfigUsage{} },
			newManaged:            func() client.Object { return &kubernetesv1alpha1.KubernetesProxy{} },
			newManagedList:        func() resource.ManagedList { return &kubernetesv1alpha1.KubernetesProxyList{} },
			newProviderConfigList: func() client.ObjectList { return &kubernetesv1alpha1.ProviderConfigList{} },
			secretName: func(o client.Object) string {
				if pc, ok := o.(*kubernetesv1alpha1.ProviderConfig); ok && pc.Spec.Credentials.SecretRef != nil {
					return pc.Spec.Credentials.SecretRef.Name
				}
				return ""
			},
		},
		{
			providerConfig:        gcpv1alpha1.ProviderConfigGroupVersionKind,
			clusterProviderConfig: gcpv1alpha1.ClusterProviderConfigGroupVersionKind,
			usage:                 gcpv1alpha1.ProviderConfigUsageGroupVersionKind,
			usageList:             gcpv1alpha1.ProviderConfigUsageListGroupVersionKind,
			newProviderConfig:     func() client.Object { return &gcpv1alpha1.ProviderConfig{} },
			newClusterConfig:      func() client.Object { return &gcpv1alpha1.ClusterProviderConfig{} },
			newUsage:              func() client.Object { return &gcpv1alpha1.ProviderConfigUsage{} },
			newManaged:            func() client.Object { return &gcpv1alpha1.GCPProxy{} },
			newManagedList:        func() resource.ManagedList { return &gcpv1alpha1.GCPProxyList{} },
			newProviderConfigList: func() client.ObjectList { return &gcpv1alpha1.ProviderConfigList{} },
			secretName: func(o client.Object) string {
				if pc, ok := o.(*gcpv1alpha1.ProviderConfig); ok && pc.Spec.Credentials.SecretRef != nil {
					return pc.Spec.Credentials.SecretRef.Name
				}
				return ""
			},
		},
		{
			providerConfig:        kvmv1alpha1.ProviderConfigGroupVersionKind,
			clusterProviderConfig: kvmv1alpha1.ClusterProviderConfigGroupVersionKind,
			usage:                 kvmv1alpha1.ProviderConfigUsageGroupVersionKind,
			usageList:             kvmv1alpha1.ProviderConfigUsageListGroupVersionKind,
			newProviderConfig:     func() client.Object { return &kvmv1alpha1.ProviderConfig{} },
			newClusterConfig:      func() client.Object { return &kvmv1alpha1.ClusterProviderConfig{} },
			newUsage:              func() client.Object { return &kvmv1alpha1.ProviderConfigUsage{} },
			newManaged:            func() client.Object { return &kvmv1alpha1.KVMProxy{} },
			newManagedList:        func() resource.ManagedList { return &kvmv1alpha1.KVMProxyList{} },
			newProviderConfigList: func() client.ObjectList { return &kvmv1alpha1.ProviderConfigList{} },
			secretName: func(o client.Object) string {
				if pc, ok := o.(*kvmv1alpha1.ProviderConfig); ok && pc.Spec.Credentials.SecretRef != nil {
					return pc.Spec.Credentials.SecretRef.Name
				}
				return ""
			},
		},
	}
}

// Setup adds a usage-counting controller for each config kind of each group,
// and the InUse controller. Both config kinds of a group count the same
// ProviderConfigUsage kind, as provider-kubernetes does: the usage tracker
// writes only that kind.
func Setup(mgr ctrl.Manager, o controller.Options) error {
	if err := setupInUse(mgr, o, groups()); err != nil {
		return err
	}
	for _, g := range groups() {
		for _, cfg := range []struct {
			gvk schema.GroupVersionKind
			obj func() client.Object
		}{{g.providerConfig, g.newProviderConfig}, {g.clusterProviderConfig, g.newClusterConfig}} {
			if err := setupKind(mgr, o, g, cfg.gvk, cfg.obj); err != nil {
				return err
			}
		}
	}
	return nil
}

func setupKind(mgr ctrl.Manager, o controller.Options, g group, config schema.GroupVersionKind, newConfig func() client.Object) error {
	name := providerconfig.ControllerName(config.GroupKind().String())
	r := providerconfig.NewReconciler(mgr, resource.ProviderConfigKinds{
		Config:    config,
		Usage:     g.usage,
		UsageList: g.usageList,
	},
		providerconfig.WithLogger(o.Logger.WithValues("controller", name)),
		providerconfig.WithRecorder(event.NewAPIRecorder(mgr.GetEventRecorderFor(name))))
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(o.ForControllerRuntime()).
		For(newConfig()).
		Watches(g.newUsage(), &resource.EnqueueRequestForProviderConfig{Kind: config.Kind}).
		Complete(ratelimiter.NewReconciler(name, r, o.GlobalRateLimiter))
}
