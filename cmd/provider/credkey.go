/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"
	"crypto/rand"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
)

const (
	// credentialsKeySecret holds the key generated proxy passwords are
	// derived with, in the provider's namespace, where app teams have no
	// access. The first provider to start makes it.
	credentialsKeySecret = "provider-egressproxy-credentials-key"
	credentialsKeyField  = "key"

	errFmtCredentialsKey      = "cannot read or make the Secret %s/%s holding the key of generated proxy passwords (--namespace, POD_NAMESPACE in a pod)"
	errFmtCredentialsKeyShort = "the Secret %s/%s must hold at least %d bytes under the key %q: delete it, and the provider makes a new one at its next start (every generated proxy password then changes)"
	errRandomKey              = "cannot draw a random key"
)

// credentialsKey returns the key of generated proxy passwords from the
// Secret credentialsKeySecret in namespace, and makes that Secret, with a
// random key, when there is none. It is immutable: a changed key would
// silently change every generated password.
func credentialsKey(ctx context.Context, c corev1client.SecretsGetter, namespace string) ([]byte, error) {
	s, err := c.Secrets(namespace).Get(ctx, credentialsKeySecret, metav1.GetOptions{})
	if kerrors.IsNotFound(err) {
		key := make([]byte, proxy.MinCredentialsKey)
		if _, err := rand.Read(key); err != nil {
			return nil, errors.Wrap(err, errRandomKey)
		}
		immutable := true
		s, err = c.Secrets(namespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: namespace,
				Name:      credentialsKeySecret,
				Labels:    map[string]string{backend.KubernetesLabelKeys.ManagedBy: backend.ManagedByValue},
			},
			Type:      corev1.SecretTypeOpaque,
			Immutable: &immutable,
			Data:      map[string][]byte{credentialsKeyField: key},
		}, metav1.CreateOptions{})
		if kerrors.IsAlreadyExists(err) {
			// Another replica made it since: theirs counts.
			s, err = c.Secrets(namespace).Get(ctx, credentialsKeySecret, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, errors.Wrapf(err, errFmtCredentialsKey, namespace, credentialsKeySecret)
	}
	key := s.Data[credentialsKeyField]
	if len(key) < proxy.MinCredentialsKey {
		return nil, errors.Errorf(errFmtCredentialsKeyShort, namespace, credentialsKeySecret, proxy.MinCredentialsKey, credentialsKeyField)
	}
	return key, nil
}
