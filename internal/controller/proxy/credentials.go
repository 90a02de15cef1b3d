/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
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
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

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

// A generated password has generatedPasswordLength characters drawn
// uniformly (crypto/rand) from the 57 of passwordAlphabet: 32 * log2(57),
// ~186 bits, beyond any guessing, which is why its hash needs no work
// factor (backend.HtpasswdCost).
const (
	generatedPasswordLength = 32
	passwordAlphabet        = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	generatedSecretSuffix   = "-credentials"
	// maxSecretName is the longest Secret name (a DNS subdomain).
	maxSecretName = 253
)

const (
	errFmtGetCredentials     = "cannot get credentialsSecretRef Secret %q"
	errFmtCredentialsKeys    = "credentialsSecretRef Secret %q must hold non-empty keys username and password"
	errFmtCredentialsInvalid = "credentialsSecretRef Secret %q: username must not contain ':' or a line break, password must not contain a line break"
	errFmtGetGenerated       = "cannot get the generated credentials Secret %q"
	errFmtCreateGenerated    = "cannot create the generated credentials Secret %q"
	errFmtForeignGenerated   = "Secret %q exists but is not controlled by this resource, so it is not used for its generated credentials: rename or delete that Secret, or set spec.forProvider.credentialsSecretRef"
	errFmtGeneratedKeys      = "the generated credentials Secret %q lacks a username or password: delete it to generate new credentials"
	errFmtGeneratedRace      = "the generated credentials Secret %q was created concurrently and cannot be read yet"
	errGeneratePassword      = "cannot generate a password"
	errKindOf                = "cannot determine the kind of the managed resource"
)

// CredentialStore finds the credentials a proxy accepts: those of the
// credentialsSecretRef Secret, or generated ones kept in a Secret the
// managed resource controls (so they survive provider restarts and are
// deleted with the resource).
type CredentialStore struct {
	client client.Client
}

// NewCredentialStore returns a CredentialStore reading Secrets with c.
func NewCredentialStore(c client.Client) *CredentialStore {
	return &CredentialStore{client: c}
}

// GeneratedSecretName is the name of the Secret the generated credentials
// of mg, of the given kind, are kept in: <name>-<kind>-credentials. The kind
// is part of it because names are unique only per kind: a KubernetesProxy
// and a GCPProxy both named web must not share credentials. A name too long
// for a Secret is cut and made unique again with a hash of the whole name.
func GeneratedSecretName(mg resource.Object, kind string) string {
	suffix := "-" + strings.ToLower(kind) + generatedSecretSuffix
	name := mg.GetName()
	if len(name)+len(suffix) <= maxSecretName {
		return name + suffix
	}
	sum := sha256.Sum256([]byte(name))
	hash := hex.EncodeToString(sum[:])[:8]
	cut := strings.TrimRight(name[:maxSecretName-len(suffix)-len(hash)-1], ".-")
	return cut + "-" + hash + suffix
}

// Credentials returns the credentials of mg's proxy: those of ref, or the
// generated ones when ref is nil. Only when generate is true are missing
// generated credentials made and stored; otherwise they are empty, so that
// merely observing a proxy writes nothing.
func (s *CredentialStore) Credentials(ctx context.Context, mg resource.Managed, ref *commonv1alpha1.LocalSecretReference, generate bool) (backend.Credentials, error) {
	if ref != nil {
		return s.given(ctx, mg.GetNamespace(), ref.Name)
	}
	return s.generated(ctx, mg, generate)
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

func (s *CredentialStore) generated(ctx context.Context, mg resource.Managed, generate bool) (backend.Credentials, error) {
	gvk, err := apiutil.GVKForObject(mg, s.client.Scheme())
	if err != nil {
		return backend.Credentials{}, errors.Wrap(err, errKindOf)
	}
	nn := types.NamespacedName{Namespace: mg.GetNamespace(), Name: GeneratedSecretName(mg, gvk.Kind)}
	c, found, err := s.stored(ctx, mg, nn)
	if found || err != nil || !generate {
		return c, err
	}
	pw, err := randomPassword()
	if err != nil {
		return backend.Credentials{}, errors.Wrap(err, errGeneratePassword)
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: nn.Namespace,
			Name:      nn.Name,
			Labels:    map[string]string{backend.KubernetesLabelKeys.ManagedBy: backend.ManagedByValue},
		},
		Type: corev1.SecretTypeBasicAuth,
		Data: map[string][]byte{SecretKeyUsername: []byte(GeneratedUsername), SecretKeyPassword: []byte(pw)},
	}
	meta.AddOwnerReference(sec, meta.AsController(meta.TypedReferenceTo(mg, gvk)))
	err = s.client.Create(ctx, sec)
	if kerrors.IsAlreadyExists(err) {
		// Created since we looked: by an earlier reconcile our cache has
		// not seen yet, or by someone else. Use it only if it is ours.
		c, found, err := s.stored(ctx, mg, nn)
		if !found && err == nil {
			err = errors.Errorf(errFmtGeneratedRace, nn.Name)
		}
		return c, err
	}
	if err != nil {
		return backend.Credentials{}, errors.Wrapf(err, errFmtCreateGenerated, nn.Name)
	}
	return backend.Credentials{Username: GeneratedUsername, Password: pw, Generated: true}, nil
}

// stored reads generated credentials from the Secret nn, which must be
// controlled by mg: a Secret of that name made by someone else could carry
// credentials they know, or be one they rely on.
func (s *CredentialStore) stored(ctx context.Context, mg resource.Managed, nn types.NamespacedName) (backend.Credentials, bool, error) {
	sec := &corev1.Secret{}
	err := s.client.Get(ctx, nn, sec)
	if kerrors.IsNotFound(err) {
		return backend.Credentials{}, false, nil
	}
	if err != nil {
		return backend.Credentials{}, false, errors.Wrapf(err, errFmtGetGenerated, nn.Name)
	}
	if !metav1.IsControlledBy(sec, mg) {
		return backend.Credentials{}, true, backend.Permanent(errors.Errorf(errFmtForeignGenerated, nn.Name))
	}
	c := backend.Credentials{Username: string(sec.Data[SecretKeyUsername]), Password: string(sec.Data[SecretKeyPassword])}
	if c.Username == "" || c.Password == "" {
		return backend.Credentials{}, true, backend.Permanent(errors.Errorf(errFmtGeneratedKeys, nn.Name))
	}
	// Someone may have written a password of their own into the Secret:
	// only one of the shape generated here counts as generated (and so is
	// hashed cheaply, see backend.HtpasswdCost).
	c.Generated = isGenerated(c.Password)
	return c, true, nil
}

// isGenerated tells whether password has the shape randomPassword gives
// it: generatedPasswordLength characters of passwordAlphabet.
func isGenerated(password string) bool {
	if len(password) != generatedPasswordLength {
		return false
	}
	for i := range len(password) {
		if !strings.ContainsRune(passwordAlphabet, rune(password[i])) {
			return false
		}
	}
	return true
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
