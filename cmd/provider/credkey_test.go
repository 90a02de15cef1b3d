/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
)

func keySecret(key []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "crossplane-system", Name: credentialsKeySecret},
		Data:       map[string][]byte{credentialsKeyField: key},
	}
}

func TestCredentialsKey(t *testing.T) {
	kept := bytes.Repeat([]byte{3}, proxy.MinCredentialsKey)
	ctx := context.Background()

	t.Run("Made", func(t *testing.T) {
		c := fake.NewClientset()
		key, err := credentialsKey(ctx, c.CoreV1(), "crossplane-system")
		if err != nil {
			t.Fatal(err)
		}
		if len(key) != proxy.MinCredentialsKey || bytes.Equal(key, make([]byte, proxy.MinCredentialsKey)) {
			t.Errorf("want %d random bytes, got %x", proxy.MinCredentialsKey, key)
		}
		s, err := c.CoreV1().Secrets("crossplane-system").Get(ctx, credentialsKeySecret, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(s.Data[credentialsKeyField], key) || s.Immutable == nil || !*s.Immutable {
			t.Errorf("the key must be kept in an immutable Secret: %+v", s)
		}
		again, err := credentialsKey(ctx, c.CoreV1(), "crossplane-system")
		if err != nil || !bytes.Equal(again, key) {
			t.Errorf("a restart must find the same key: %x, %v", again, err)
		}
	})
	t.Run("Kept", func(t *testing.T) {
		c := fake.NewClientset(keySecret(kept))
		key, err := credentialsKey(ctx, c.CoreV1(), "crossplane-system")
		if err != nil || !bytes.Equal(key, kept) {
			t.Errorf("want the key of the Secret, got %x, %v", key, err)
		}
	})
	t.Run("MadeByAnotherReplica", func(t *testing.T) {
		// The Secret appears between our Get and our Create: theirs counts.
		c := fake.NewClientset()
		c.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			if err := c.Tracker().Add(keySecret(kept)); err != nil {
				t.Fatal(err)
			}
			return true, nil, kerrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, credentialsKeySecret)
		})
		key, err := credentialsKey(ctx, c.CoreV1(), "crossplane-system")
		if err != nil || !bytes.Equal(key, kept) {
			t.Errorf("want the other replica's key, got %x, %v", key, err)
		}
	})
	t.Run("TooShort", func(t *testing.T) {
		c := fake.NewClientset(keySecret([]byte("short")))
		_, err := credentialsKey(ctx, c.CoreV1(), "crossplane-system")
		if err == nil || !strings.Contains(err.Error(), "crossplane-system/"+credentialsKeySecret) {
			t.Errorf("a short key must be refused, naming the Secret: %v", err)
		}
	})
	t.Run("Forbidden", func(t *testing.T) {
		c := fake.NewClientset()
		c.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, kerrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, credentialsKeySecret, nil)
		})
		_, err := credentialsKey(ctx, c.CoreV1(), "crossplane-system")
		if err == nil || !strings.Contains(err.Error(), "POD_NAMESPACE") {
			t.Errorf("a failed read must say where the key is looked for: %v", err)
		}
	})
}
