/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvmproxy

import (
	"context"
	"fmt"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/dialer"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
)

const (
	errNoSecretRef    = "credentials.source is Secret but credentials.secretRef is not set"
	errFmtGetUserData = "cannot get userDataSecretRef Secret %s/%s"
	errFmtUserDataKey = "userDataSecretRef Secret %s/%s has no non-empty key %q"
	errFmtNewBackend  = "cannot build the kvm backend for %s"
)

// NewFactory returns the BackendFactory of the kvm backend. It keeps one
// backend, and so one pooled libvirt connection, per provider config, keyed
// by the config's UID and rebuilt (the old connection closed) when the
// config's generation or its credentials Secret's resource version changes,
// so a rotated key takes effect without a restart. The connection itself
// re-dials whenever it breaks. A namespaced ProviderConfig may not use the
// provider's own sockets (dialer.CheckNamespaced). opts are passed to every backend, e.g.
// kvm.WithBootDevices in tests.
func NewFactory(opts ...kvm.Option) BackendFactory {
	return newFactory(nil, opts...)
}

// newFactory is NewFactory that closes the backend of a config d reports
// deleted.
func newFactory(d *proxy.Deletions, opts ...kvm.Option) BackendFactory {
	cache := proxy.NewClientCache[*kvm.Backend]()
	cache.ForgetOn(d)
	return func(ctx context.Context, kube client.Client, cfg proxy.Config) (Backend, error) {
		spec, err := proxy.ConfigSpec[v1alpha1.ProviderConfigSpec](cfg)
		if err != nil {
			return nil, err
		}
		if err := cfg.CheckSource(string(spec.Credentials.Source)); err != nil {
			return nil, err
		}
		t := dialer.Target{URI: spec.URI}
		if spec.SocketPath != nil {
			t.SocketPath = *spec.SocketPath
		}
		secretVersion := ""
		if spec.Credentials.Source == v1alpha1.CredentialsSourceSecret {
			if spec.Credentials.SecretRef == nil {
				return nil, backend.Permanent(errors.New(errNoSecretRef))
			}
			s, err := cfg.Secret(ctx, kube, *spec.Credentials.SecretRef)
			if err != nil {
				return nil, err
			}
			t.Credentials, secretVersion = dialer.CredentialsFromSecret(s.Data), s.GetResourceVersion()
		}
		kind := proxy.KindClusterProviderConfig
		if _, ok := cfg.Object.(*v1alpha1.ProviderConfig); ok {
			kind = proxy.KindProviderConfig
			// A team's config reaches only remote hosts, with its own
			// credentials; admission checks the spec, this what is dialled.
			t.Namespaced = true
			if err := dialer.CheckNamespaced(t); err != nil {
				return nil, errors.Wrapf(err, errFmtNewBackend, cfg.Object.GetName())
			}
		}
		// The policy is the config's: a new generation builds a new backend.
		pol := kvm.Policy{Config: fmt.Sprintf("%s %q", kind, cfg.Object.GetName()), KVM: spec.Policy.KVM}
		b, err := cache.Get(cfg.CacheKey(), cfg.CacheVersion(secretVersion), func() (*kvm.Backend, error) {
			// The manager's client is the same for every call, so the
			// cached backend may keep the one it was built with.
			all := append([]kvm.Option{kvm.WithUserDataSource(UserDataFromSecrets(kube)), kvm.WithPolicy(pol)}, opts...)
			return kvm.New(t, all...)
		})
		if err != nil {
			return nil, errors.Wrapf(err, errFmtNewBackend, cfg.Object.GetName())
		}
		return b, nil
	}
}

// UserDataFromSecrets reads a KVMProxy's userDataSecretRef from its own
// namespace. A missing Secret or key is Permanent: the user must fix it.
func UserDataFromSecrets(kube client.Client) kvm.UserDataSource {
	return func(ctx context.Context, namespace string, ref commonv1alpha1.LocalSecretKeySelector) ([]byte, error) {
		s := &corev1.Secret{}
		if err := kube.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, s); err != nil {
			err = errors.Wrapf(err, errFmtGetUserData, namespace, ref.Name)
			if kerrors.IsNotFound(err) {
				return nil, backend.Permanent(err)
			}
			return nil, err
		}
		ud := s.Data[ref.Key]
		if len(ud) == 0 {
			return nil, backend.Permanent(errors.Errorf(errFmtUserDataKey, namespace, ref.Name, ref.Key))
		}
		return ud, nil
	}
}
