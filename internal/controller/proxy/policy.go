/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/policy"
)

const (
	errPolicyRefuses  = "refused by the policy of the provider config"
	errFmtNoPolicy    = "provider config %T carries no policy the provider can read"
	errFmtNoCheck     = "the backend of provider config %T has no policy check"
	errFmtGetNS       = "cannot get namespace %q to match it against %s.namespaceSelector"
	errFmtNSForbidden = "cannot evaluate %s.namespaceSelector: the provider's ServiceAccount may not %s namespaces; " +
		"it needs get, list and watch on namespaces: bind the ClusterRole " + NamespacesClusterRole +
		" (examples/rbac/provider-egressproxy.yaml, docs/platform.md)"
)

// NamespacesClusterRole is the ClusterRole (examples/rbac) that lets the
// provider read the labels of namespaces, which a namespaceSelector needs.
const NamespacesClusterRole = "provider-egressproxy:namespaces"

// namespaceProbeTimeout bounds the direct read that tells whether the
// provider may read namespaces at all.
const namespaceProbeTimeout = 10 * time.Second

// namespaces reads the namespaces a namespaceSelector is matched against.
// The manager's cache serves them once a direct read has shown that the
// provider may read namespaces: without that permission the cache's
// informer never syncs, and a read from it would hang until the reconcile
// times out, saying nothing of why. Until then every read is direct and
// bounded, and a refusal names the role to grant.
type namespaces struct {
	cache  client.Reader
	direct client.Reader
	cached atomic.Bool
}

func (n *namespaces) get(ctx context.Context, name, rules string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	if n.direct == nil || n.cached.Load() {
		// Only read: the cache's own object needs no copy.
		err := n.cache.Get(ctx, types.NamespacedName{Name: name}, ns, client.UnsafeDisableDeepCopy)
		return ns, errors.Wrapf(err, errFmtGetNS, name, rules)
	}
	pctx, cancel := context.WithTimeout(ctx, namespaceProbeTimeout)
	defer cancel()
	err := n.direct.Get(pctx, types.NamespacedName{Name: name}, ns)
	if kerrors.IsForbidden(err) {
		// Nothing in the resource or its config can fix it: the
		// platform must grant the role.
		return nil, backend.Permanent(errors.Errorf(errFmtNSForbidden, rules, "get"))
	}
	if err != nil {
		return nil, errors.Wrapf(err, errFmtGetNS, name, rules)
	}
	// The cache lists namespaces before it serves one: with get alone its
	// informer would never sync either.
	err = n.direct.List(pctx, &corev1.NamespaceList{}, client.Limit(1))
	if kerrors.IsForbidden(err) {
		return nil, backend.Permanent(errors.Errorf(errFmtNSForbidden, rules, "list"))
	}
	if err != nil {
		return nil, errors.Wrapf(err, errFmtGetNS, name, rules)
	}
	n.cached.Store(true)
	return ns, nil
}

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

// BackendPolicy is a backend's own policy check, its description's
// Policy (see backend.Description).
type BackendPolicy func(cfg, forProvider any, namespace string) ([]string, error)

// checkPolicy refuses mg, whose proxy allows p and whose backend
// parameters are forProvider, when it breaks the policy of its provider
// config cfg: its namespace is not selected, p breaks a rule common to
// every backend, or forProvider a rule of its backend's (bp, the backend's
// own check). The error names
// every field and rule broken; it is permanent, as only a change of mg or
// of the policy resolves it. It is the one place the provider applies the
// policy, for every backend alike: before Observe, Create and Update, so a
// refused resource is never created, changed or deleted for it.
func checkPolicy(ctx context.Context, nss *namespaces, mg resource.ModernManaged, cfg Config, p commonv1alpha1.ProxyParameters, forProvider any, bp BackendPolicy) error {
	at := policyPaths(mg, cfg)
	h, ok := cfg.Object.(PolicyHolder)
	if !ok {
		// Never a policy that allows everything (Setup refuses such kinds).
		return backend.Permanent(errors.Errorf(errFmtNoPolicy, cfg.Object))
	}
	pol := h.GetProxyPolicy()
	var v []string
	if pol.NamespaceSelector != nil {
		ns, err := nss.get(ctx, mg.GetNamespace(), at.Rules)
		if err != nil {
			return err
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
	if bp == nil {
		// Never a backend policy that allows everything.
		return backend.Permanent(errors.Errorf(errFmtNoCheck, cfg.Object))
	}
	bv, err := bp(cfg.Object, forProvider, mg.GetNamespace())
	if err != nil {
		return backend.Permanent(err)
	}
	if v = append(append(v, pv...), bv...); len(v) == 0 {
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
