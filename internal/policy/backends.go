/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package policy

import (
	"fmt"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	gcpv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	kubernetesv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	kvmv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
)

const errFmtBackendMismatch = "cannot apply the policy of a %T to parameters of type %T"

// BackendViolations returns the rules of the per-backend policy of a
// provider config (spec.policy.kvm, .gcp or .kubernetes, with the config's
// allowedServiceAccounts, allowedNamespaces and allowedImages) that a
// managed resource's spec.forProvider breaks, each naming the field and the
// rule. cfg is a ProviderConfig or ClusterProviderConfig of one backend,
// forProvider that backend's parameters (a value or a pointer), namespace
// the managed resource's. The provider's connector applies it to every
// managed resource before any backend call, and the composition function
// to what it is about to compose, so both give the same message. The
// kubernetes rules name the first field they refuse; the others every one.
func BackendViolations(cfg any, forProvider any, namespace string) ([]string, error) {
	switch c := cfg.(type) {
	case *kvmv1alpha1.ClusterProviderConfig:
		return kvmViolations(KVM{Config: fmt.Sprintf("%s %q", kvmv1alpha1.ClusterProviderConfigKind, c.GetName()), Rules: c.Spec.Policy.KVM}, cfg, forProvider)
	case *kvmv1alpha1.ProviderConfig:
		return kvmViolations(KVM{Config: fmt.Sprintf("%s %q", kvmv1alpha1.ProviderConfigKind, c.GetName()), Rules: c.Spec.Policy.KVM}, cfg, forProvider)
	case *gcpv1alpha1.ClusterProviderConfig:
		return gcpViolations(GCPOf(c.Spec, gcpv1alpha1.ClusterProviderConfigKind+" "+c.GetName()), cfg, forProvider)
	case *gcpv1alpha1.ProviderConfig:
		return gcpViolations(GCPOf(c.Spec, gcpv1alpha1.ProviderConfigKind+" "+c.GetNamespace()+"/"+c.GetName()), cfg, forProvider)
	case *kubernetesv1alpha1.ClusterProviderConfig:
		return kubernetesViolations(KubernetesOf(c.Spec, kubernetesv1alpha1.ClusterProviderConfigKind+" "+c.GetName()), cfg, forProvider, namespace)
	case *kubernetesv1alpha1.ProviderConfig:
		return kubernetesViolations(KubernetesOf(c.Spec, kubernetesv1alpha1.ProviderConfigKind+" "+c.GetNamespace()+"/"+c.GetName()), cfg, forProvider, namespace)
	}
	return nil, errors.Errorf(errFmtBackendMismatch, cfg, forProvider)
}

// GCPOf returns the gcp policy of a config's spec, named config.
func GCPOf(spec gcpv1alpha1.ProviderConfigSpec, config string) GCP {
	g := GCP{Config: config}
	if spec.Policy.GCP != nil {
		g.Rules = *spec.Policy.GCP
	}
	g.ServiceAccounts = append(append([]string{}, spec.AllowedServiceAccounts...), g.Rules.ServiceAccounts...)
	return g
}

// KubernetesOf returns the kubernetes policy of a config's spec, named
// config.
func KubernetesOf(spec kubernetesv1alpha1.ProviderConfigSpec, config string) Kubernetes {
	k := Kubernetes{Config: config, Namespaces: spec.AllowedNamespaces, Images: spec.AllowedImages}
	if spec.Policy.Kubernetes != nil {
		k.KubernetesPolicy = *spec.Policy.Kubernetes
	}
	return k
}

func kvmViolations(k KVM, cfg, forProvider any) ([]string, error) {
	switch p := forProvider.(type) {
	case kvmv1alpha1.KVMProxyParameters:
		return k.Violations(p), nil
	case *kvmv1alpha1.KVMProxyParameters:
		return k.Violations(*p), nil
	}
	return nil, errors.Errorf(errFmtBackendMismatch, cfg, forProvider)
}

func gcpViolations(g GCP, cfg, forProvider any) ([]string, error) {
	switch p := forProvider.(type) {
	case gcpv1alpha1.GCPProxyParameters:
		return g.Violations(p), nil
	case *gcpv1alpha1.GCPProxyParameters:
		return g.Violations(*p), nil
	}
	return nil, errors.Errorf(errFmtBackendMismatch, cfg, forProvider)
}

func kubernetesViolations(k Kubernetes, cfg, forProvider any, namespace string) ([]string, error) {
	var m string
	switch p := forProvider.(type) {
	case kubernetesv1alpha1.KubernetesProxyParameters:
		m = k.Violation(p, namespace)
	case *kubernetesv1alpha1.KubernetesProxyParameters:
		m = k.Violation(*p, namespace)
	default:
		return nil, errors.Errorf(errFmtBackendMismatch, cfg, forProvider)
	}
	if m == "" {
		return nil, nil
	}
	return []string{m}, nil
}
