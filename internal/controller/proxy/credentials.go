/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"crypto/rand"
	"math/big"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// Keys of a credentials Secret, given or generated.
const (
	SecretKeyUsername = "username"
	SecretKeyPassword = "password"
)

// GeneratedUsername is the user name of generated credentials.
const GeneratedUsername = "egressproxy"

const (
	generatedPasswordLength = 32
	passwordAlphabet        = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	generatedSecretSuffix   = "-proxy-credentials"
)

const (
	errFmtGetCredentials     = "cannot get credentialsSecretRef Secret %q"
	errFmtCredentialsKeys    = "credentialsSecretRef Secret %q must hold non-empty keys username and password"
	errFmtCredentialsInvalid = "credentialsSecretRef Secret %q: username must not contain ':' or a line break, password must not contain a line break"
	errGetGenerated          = "cannot get the generated credentials Secret"
	errCreateGenerated       = "cannot create the generated credentials Secret"
	errGeneratePassword      = "cannot generate a password"
)

// CredentialStore finds the credentials a proxy accepts: those of the
// credentialsSecretRef Secret, or generated ones kept in a Secret the
// managed resource owns (so they survive provider restarts and are deleted
// with the resource).
type CredentialStore struct {
	client client.Client
}

// NewCredentialStore returns a CredentialStore reading Secrets with c.
func NewCredentialStore(c client.Client) *CredentialStore {
	return &CredentialStore{client: c}
}

// GeneratedSecretName is the name of the Secret generated credentials of mg
// are kept in.
func GeneratedSecretName(mg resource.Object) string {
	return mg.GetName() + generatedSecretSuffix
}

// Credentials returns the credentials of mg's proxy, generating them on
// first use when ref is nil.
func (s *CredentialStore) Credentials(ctx context.Context, mg resource.Managed, ref *commonv1alpha1.LocalSecretReference) (backend.Credentials, error) {
	if ref != nil {
		return s.given(ctx, mg.GetNamespace(), ref.Name)
	}
	return s.generated(ctx, mg)
}

func (s *CredentialStore) given(ctx context.Context, namespace, name string) (backend.Credentials, error) {
	sec := &corev1.Secret{}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, sec); err != nil {
		// A missing Secret is the user's to fix, but they may be about to
		// create it: Permanent reports it clearly and backoff retries.
		return backend.Credentials{}, backend.Permanent(errors.Wrapf(err, errFmtGetCredentials, name))
	}
	c := backend.Credentials{Username: string(sec.Data[SecretKeyUsername]), Password: string(sec.Data[SecretKeyPassword])}
	if c.Username == "" || c.Password == "" {
		return backend.Credentials{}, backend.Permanent(errors.Errorf(errFmtCredentialsKeys, name))
	}
	if strings.ContainsAny(c.Username, ":\r\n") || strings.ContainsAny(c.Password, "\r\n") {
		return backend.Credentials{}, backend.Permanent(errors.Errorf(errFmtCredentialsInvalid, name))
	}
	return c, nil
}

func (s *CredentialStore) generated(ctx context.Context, mg resource.Managed) (backend.Credentials, error) {
	sec := &corev1.Secret{}
	nn := types.NamespacedName{Namespace: mg.GetNamespace(), Name: GeneratedSecretName(mg)}
	err := s.client.Get(ctx, nn, sec)
	if err == nil {
		return backend.Credentials{Username: string(sec.Data[SecretKeyUsername]), Password: string(sec.Data[SecretKeyPassword])}, nil
	}
	if !kerrors.IsNotFound(err) {
		return backend.Credentials{}, errors.Wrap(err, errGetGenerated)
	}
	pw, err := randomPassword()
	if err != nil {
		return backend.Credentials{}, errors.Wrap(err, errGeneratePassword)
	}
	sec = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: nn.Namespace,
			Name:      nn.Name,
			Labels:    map[string]string{backend.KubernetesLabelKeys.ManagedBy: backend.ManagedByValue},
		},
		Type: corev1.SecretTypeBasicAuth,
		Data: map[string][]byte{SecretKeyUsername: []byte(GeneratedUsername), SecretKeyPassword: []byte(pw)},
	}
	meta.AddOwnerReference(sec, meta.AsController(meta.TypedReferenceTo(mg, mg.GetObjectKind().GroupVersionKind())))
	if err := s.client.Create(ctx, sec); err != nil {
		if kerrors.IsAlreadyExists(err) {
			// Another reconcile won the race; use what it stored.
			return s.generated(ctx, mg)
		}
		return backend.Credentials{}, errors.Wrap(err, errCreateGenerated)
	}
	return backend.Credentials{Username: GeneratedUsername, Password: pw}, nil
}

func randomPassword() (string, error) {
	var b strings.Builder
	max := big.NewInt(int64(len(passwordAlphabet)))
	for range generatedPasswordLength {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", err
		}
		b.WriteByte(passwordAlphabet[n.Int64()])
	}
	return b.String(), nil
}
