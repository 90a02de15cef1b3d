/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"fmt"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/policy"
)

const (
	errPolicyRefuses = "refused by the policy of the provider config"
	errFmtNoPolicy   = "provider config %T carries no policy the provider can read"
	errFmtGetNS      = "cannot get namespace %q to match it against %s.namespaceSelector"
)

// A PolicyHolder is a provider config that carries the platform's policy.
// Every provider config kind the provider registers is one.
type PolicyHolder interface {
	GetProxyPolicy() *commonv1alpha1.ProxyPolicy
}

// policyPaths name mg's proxy parameters and the policy of its config cfg
// in messages: `ClusterProviderConfig "lab" spec.policy`. ResolveConfig
// resolved cfg from mg's reference, so mg has one.
func policyPaths(mg resource.ModernManaged, cfg Config) policy.Paths {
	return policy.Paths{
		Proxy: "spec.forProvider",
		Rules: fmt.Sprintf("%s %q spec.policy", mg.GetProviderConfigReference().Kind, cfg.Object.GetName()),
	}
}

// checkPolicy refuses mg, whose proxy allows p, when it breaks the policy
// of its provider config cfg: its namespace is not selected, or p breaks a
// rule common to every backend. The error names every field and rule
// broken; it is permanent, as only a change of mg or of the policy
// resolves it.
func checkPolicy(ctx context.Context, kube client.Client, mg resource.ModernManaged, cfg Config, p commonv1alpha1.ProxyParameters) error {
	at := policyPaths(mg, cfg)
	h, ok := cfg.Object.(PolicyHolder)
	if !ok {
		// Never a policy that allows everything (Setup refuses such kinds).
		return backend.Permanent(errors.Errorf(errFmtNoPolicy, cfg.Object))
	}
	pol := h.GetProxyPolicy()
	var v []string
	if pol.NamespaceSelector != nil {
		ns := &corev1.Namespace{}
		// Only read: the cache's own object needs no copy.
		if err := kube.Get(ctx, types.NamespacedName{Name: mg.GetNamespace()}, ns, client.UnsafeDisableDeepCopy); err != nil {
			return errors.Wrapf(err, errFmtGetNS, mg.GetNamespace(), at.Rules)
		}
		m, err := policy.NamespaceViolation(pol.NamespaceSelector, ns.GetName(), ns.GetLabels(), at)
		if err != nil {
			return backend.Permanent(err)
		}
		if m != "" {
			v = append(v, m)
		}
	}
	pv, err := policy.Violations(pol.ProxyRules, p, at)
	if err != nil {
		return backend.Permanent(err)
	}
	if v = append(v, pv...); len(v) == 0 {
		return nil
	}
	return backend.Permanent(errors.Wrap(errors.New(strings.Join(v, "; ")), errPolicyRefuses))
}

// allowedPrivate returns the private networks the policy of cfg lets its
// proxies reach, which squid enforces on the addresses names resolve to.
func allowedPrivate(cfg Config) []string {
	if h, ok := cfg.Object.(PolicyHolder); ok {
		return h.GetProxyPolicy().AllowedPrivateDestinations
	}
	return nil
}
