/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// Provider config kinds a managed resource may refer to.
const (
	KindProviderConfig        = "ProviderConfig"
	KindClusterProviderConfig = "ClusterProviderConfig"
)

const (
	errNoConfigRef          = "spec.providerConfigRef is not set"
	errFmtUnknownConfigKind = "spec.providerConfigRef.kind %q is neither ProviderConfig nor ClusterProviderConfig"
	errFmtGetConfig         = "cannot get %s %q"
	errFmtGetSecret         = "cannot get Secret %s/%s"
	errFmtSecretKey         = "Secret %s/%s has no key %q"
	errSecretNamespace      = "secretRef.namespace is required in a ClusterProviderConfig"
	errFmtNamespacedSource  = "spec.credentials.source %q: a namespaced ProviderConfig must use Secret: the provider's own identity is only for a ClusterProviderConfig, so a team cannot borrow the platform's credentials"
)

// SourceSecret is the credentials source every backend names Secret.
const SourceSecret = "Secret"

// Config is a resolved provider config.
type Config struct {
	// Object is the ProviderConfig or ClusterProviderConfig that was read.
	Object client.Object
	// SecretNamespace is the namespace the config's Secrets are read from:
	// the managed resource's own for a ProviderConfig, so that a namespaced
	// config can never read another namespace's Secrets; empty for a
	// ClusterProviderConfig, whose secret references name their namespace.
	SecretNamespace string
}

// ResolveConfig reads the ProviderConfig (into pc) or ClusterProviderConfig
// (into cpc) mg refers to. It writes no ProviderConfigUsage: the config
// controllers count the managed resources that refer to a config from the
// cache (see package config), which saves a write per new resource.
func ResolveConfig(ctx context.Context, c client.Client, mg resource.ModernManaged, pc, cpc client.Object) (Config, error) {
	ref := mg.GetProviderConfigReference()
	if ref == nil {
		return Config{}, backend.Permanent(errors.New(errNoConfigRef))
	}
	switch ref.Kind {
	case KindProviderConfig:
		err := c.Get(ctx, types.NamespacedName{Namespace: mg.GetNamespace(), Name: ref.Name}, pc)
		return Config{Object: pc, SecretNamespace: mg.GetNamespace()}, configError(err, ref.Kind, ref.Name)
	case KindClusterProviderConfig:
		err := c.Get(ctx, types.NamespacedName{Name: ref.Name}, cpc)
		return Config{Object: cpc}, configError(err, ref.Kind, ref.Name)
	}
	return Config{}, backend.Permanent(errors.Errorf(errFmtUnknownConfigKind, ref.Kind))
}

func configError(err error, kind, name string) error {
	if err == nil {
		return nil
	}
	err = errors.Wrapf(err, errFmtGetConfig, kind, name)
	if resource.IgnoreNotFound(err) == nil {
		// The config may be created soon; until then it is the user's to fix.
		return backend.Permanent(err)
	}
	return err
}

// CheckSource refuses a credentials source other than Secret in a
// namespaced ProviderConfig: any other is the provider's own identity. The
// API refuses it too (CEL), but a rule that guards the platform's
// credentials must not rest on admission alone.
func (cfg Config) CheckSource(source string) error {
	if cfg.Object.GetNamespace() == "" || source == SourceSecret {
		return nil
	}
	return backend.Permanent(errors.Errorf(errFmtNamespacedSource, source))
}

// SecretLocation names where a secret reference of cfg points, namespace/name
// (or only the name when a ClusterProviderConfig's reference has no
// namespace), for messages.
func (cfg Config) SecretLocation(ref commonv1alpha1.SecretReference) string {
	if ns, err := cfg.secretNamespace(ref); err == nil {
		return ns + "/" + ref.Name
	}
	return ref.Name
}

// secretNamespace returns the namespace a secret reference of cfg resolves to.
func (cfg Config) secretNamespace(ref commonv1alpha1.SecretReference) (string, error) {
	if cfg.SecretNamespace != "" {
		return cfg.SecretNamespace, nil
	}
	if ref.Namespace == "" {
		return "", backend.Permanent(errors.New(errSecretNamespace))
	}
	return ref.Namespace, nil
}

// Secret reads the Secret ref names, in the namespace cfg allows. It is
// read on every connect, so it is the cache's own, not a copy: callers only
// read it (its resource version, above all) and must never change it.
func (cfg Config) Secret(ctx context.Context, c client.Client, ref commonv1alpha1.SecretReference) (*corev1.Secret, error) {
	ns, err := cfg.secretNamespace(ref)
	if err != nil {
		return nil, err
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, s, client.UnsafeDisableDeepCopy); err != nil {
		err = errors.Wrapf(err, errFmtGetSecret, ns, ref.Name)
		if resource.IgnoreNotFound(err) == nil {
			return nil, backend.Permanent(err)
		}
		return nil, err
	}
	return s, nil
}

// SecretKey reads one key of the Secret ref selects. It also returns the
// Secret's resource version, so clients built from it can be rebuilt when
// the Secret changes. The value is the cache's own (see Secret).
func (cfg Config) SecretKey(ctx context.Context, c client.Client, ref commonv1alpha1.SecretKeySelector) ([]byte, string, error) {
	s, err := cfg.Secret(ctx, c, ref.SecretReference)
	if err != nil {
		return nil, "", err
	}
	v, ok := s.Data[ref.Key]
	if !ok || len(v) == 0 {
		return nil, "", backend.Permanent(errors.Errorf(errFmtSecretKey, s.GetNamespace(), s.GetName(), ref.Key))
	}
	return v, s.GetResourceVersion(), nil
}
