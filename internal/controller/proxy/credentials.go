/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
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

// A generated password has generatedPasswordLength characters of the 57 of
// passwordAlphabet, drawn uniformly from a keyed hash (derivedPassword):
// 32 * log2(57), ~186 bits, beyond any guessing, which is why its hash
// needs no work factor (backend.HtpasswdCost).
const (
	generatedPasswordLength = 32
	passwordAlphabet        = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	generatedSecretSuffix   = "-credentials"
	// maxSecretName is the longest Secret name (a DNS subdomain).
	maxSecretName = 253
	// MinCredentialsKey is the shortest key generated passwords are
	// derived with: an HMAC-SHA256 key of fewer bytes than its output
	// would be the weaker part.
	MinCredentialsKey = 32
	// passwordDomain separates these hashes from any other use of the key.
	passwordDomain = "egressproxy.io/generated-password/v1"
)

const (
	errFmtGetCredentials     = "cannot get credentialsSecretRef Secret %q"
	errFmtCredentialsKeys    = "credentialsSecretRef Secret %q must hold non-empty keys username and password"
	errFmtCredentialsInvalid = "credentialsSecretRef Secret %q: username must not contain ':' or a line break, password must not contain a line break"
	errFmtGetGenerated       = "cannot get the generated credentials Secret %q"
	errKindOf                = "cannot determine the kind of the managed resource"
)

// CredentialStore finds the credentials a proxy accepts: those of the
// credentialsSecretRef Secret, or generated ones.
//
// A generated password is derived, not stored: a keyed hash of the managed
// resource's kind, UID and credentials-rotation annotation, with a key only
// the provider reads (cmd/provider keeps it in a Secret of its own
// namespace). Generating one writes nothing, so it survives a crash between
// Create and the connection Secret without a Secret of its own (one write
// per new proxy fewer, docs/bench.md at 22cd24f), and a new value of the annotation
// rotates it. Earlier versions stored a random password in a Secret the
// resource controls; while that Secret is there, its password is kept, so
// an upgrade changes no proxy's password, and deleting it rotates.
type CredentialStore struct {
	client client.Client
	key    []byte
}

// NewCredentialStore returns a CredentialStore reading Secrets with c and
// deriving generated passwords with key.
func NewCredentialStore(c client.Client, key []byte) *CredentialStore {
	return &CredentialStore{client: c, key: key}
}

// GeneratedSecretName is the name of the Secret earlier versions kept the
// generated credentials of mg, of the given kind, in:
// <name>-<kind>-credentials. The kind is part of it because names are
// unique only per kind. A name too long for a Secret is cut and made unique
// again with a hash of the whole name.
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
// generated ones when ref is nil. Only when generate is true are generated
// credentials derived; otherwise (a resource only observed, whose instance
// the provider did not make) they are those an earlier version stored, or
// none.
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
	rotation := mg.GetAnnotations()[commonv1alpha1.AnnotationKeyCredentialsRotation]
	return backend.Credentials{Username: GeneratedUsername, Password: derivedPassword(s.key, gvk.Kind, mg.GetUID(), rotation), Generated: true}, nil
}

// stored reads the generated credentials an earlier version kept in the
// Secret nn. Only a Secret mg controls, with both keys, counts: one of that
// name made by someone else could carry credentials they know.
func (s *CredentialStore) stored(ctx context.Context, mg resource.Managed, nn types.NamespacedName) (backend.Credentials, bool, error) {
	sec := &corev1.Secret{}
	err := s.client.Get(ctx, nn, sec)
	if kerrors.IsNotFound(err) {
		return backend.Credentials{}, false, nil
	}
	if err != nil {
		return backend.Credentials{}, false, errors.Wrapf(err, errFmtGetGenerated, nn.Name)
	}
	c := backend.Credentials{Username: string(sec.Data[SecretKeyUsername]), Password: string(sec.Data[SecretKeyPassword])}
	if !metav1.IsControlledBy(sec, mg) || c.Username == "" || c.Password == "" {
		return backend.Credentials{}, false, nil
	}
	// Someone may have written a password of their own into the Secret:
	// only one of the shape generated here counts as generated (and so is
	// hashed cheaply, see backend.HtpasswdCost).
	c.Generated = isGenerated(c.Password)
	return c, true, nil
}

// derivedPassword is the generated password of the resource of kind with
// uid, at rotation: generatedPasswordLength characters of passwordAlphabet
// drawn from HMAC-SHA256(key, ...) in counter mode. Bytes at or above the
// largest multiple of the alphabet's size are skipped, so each character
// is uniform.
func derivedPassword(key []byte, kind string, uid types.UID, rotation string) string {
	const limit = 256 - 256%len(passwordAlphabet)
	msg := []byte(passwordDomain + "\x00" + kind + "\x00" + string(uid) + "\x00" + rotation + "\x00")
	out := make([]byte, 0, generatedPasswordLength)
	for block := byte(0); len(out) < generatedPasswordLength; block++ {
		h := hmac.New(sha256.New, key)
		h.Write(msg)
		h.Write([]byte{block})
		for _, b := range h.Sum(nil) {
			if int(b) < limit && len(out) < generatedPasswordLength {
				out = append(out, passwordAlphabet[int(b)%len(passwordAlphabet)])
			}
		}
	}
	return string(out)
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
