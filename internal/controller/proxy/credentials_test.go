/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// testKey is the key generated passwords are derived with in these tests.
var testKey = bytes.Repeat([]byte{7}, MinCredentialsKey)

func TestGeneratedSecretName(t *testing.T) {
	named := func(n string) *v1alpha1.KubernetesProxy {
		return &v1alpha1.KubernetesProxy{ObjectMeta: metav1.ObjectMeta{Name: n}}
	}
	long := strings.Repeat("a", 240)
	cases := map[string]struct {
		reason string
		name   string
		kind   string
		want   string
	}{
		"Short": {reason: "The kind is part of the name.", name: "web", kind: "GCPProxy", want: "web-gcpproxy-credentials"},
		"Long": {reason: "A name too long for a Secret is cut and made unique with a hash.", name: long + ".b", kind: "KubernetesProxy",
			want: strings.Repeat("a", 216) + "-ec312dd9-kubernetesproxy-credentials"},
		"CutAtDot": {reason: "A cut that ends in a dot drops it: a Secret name's labels end in a letter or digit.", name: strings.Repeat("a", 215) + "." + strings.Repeat("b", 40), kind: "KubernetesProxy",
			want: strings.Repeat("a", 215) + "-4e5fa438-kubernetesproxy-credentials"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := GeneratedSecretName(named(tc.name), tc.kind)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nGeneratedSecretName(): -want, +got:\n%s", tc.reason, diff)
			}
			if errs := validation.IsDNS1123Subdomain(got); len(errs) != 0 {
				t.Errorf("%s\n%q is not a valid Secret name: %v", tc.reason, got, errs)
			}
		})
	}
	if GeneratedSecretName(named(long+".b"), "KVMProxy") == GeneratedSecretName(named(long+".c"), "KVMProxy") {
		t.Error("long names that differ only past the cut must not share a Secret")
	}
}

func TestIsGenerated(t *testing.T) {
	cases := map[string]struct {
		reason   string
		password string
		want     bool
	}{
		"Generated":  {reason: "A derived password has the generated shape.", password: derivedPassword(testKey, "KubernetesProxy", "uid", ""), want: true},
		"Short":      {reason: "A password of another length was written by someone else.", password: "hunter2", want: false},
		"SameLength": {reason: "A password of the right length with a character outside the alphabet is not generated.", password: strings.Repeat("l", generatedPasswordLength), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, isGenerated(tc.password)); diff != "" {
				t.Errorf("%s\nisGenerated(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDerivedPassword(t *testing.T) {
	base := derivedPassword(testKey, "KubernetesProxy", "uid-1", "")
	if !isGenerated(base) {
		t.Fatalf("derivedPassword() = %q: want %d characters of the alphabet", base, generatedPasswordLength)
	}
	if again := derivedPassword(testKey, "KubernetesProxy", "uid-1", ""); again != base {
		t.Errorf("derivedPassword() is not deterministic: %q, then %q", base, again)
	}
	other := bytes.Repeat([]byte{9}, MinCredentialsKey)
	cases := map[string]struct {
		reason string
		got    string
	}{
		"Key":      {reason: "Another key (another control plane) derives another password.", got: derivedPassword(other, "KubernetesProxy", "uid-1", "")},
		"UID":      {reason: "Each resource has its own password.", got: derivedPassword(testKey, "KubernetesProxy", "uid-2", "")},
		"Kind":     {reason: "The kind is part of what is hashed.", got: derivedPassword(testKey, "GCPProxy", "uid-1", "")},
		"Rotation": {reason: "A rotation value gives a new password.", got: derivedPassword(testKey, "KubernetesProxy", "uid-1", "2026-12-05")},
		"Boundary": {reason: "Fields are separated: moving a character from one to the next changes the password.", got: derivedPassword(testKey, "KubernetesProxyu", "id-1", "")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.got == base {
				t.Errorf("%s\nderivedPassword() = %q, the same as the base case", tc.reason, tc.got)
			}
			if !isGenerated(tc.got) {
				t.Errorf("%s\nderivedPassword() = %q: not of the generated shape", tc.reason, tc.got)
			}
		})
	}
}

func TestDerivedPasswordUniform(t *testing.T) {
	// Every character of the alphabet turns up, at about its share: a
	// modulo bias or a stuck block would show as a skewed count.
	counts := map[rune]int{}
	const n = 2000
	for i := range n {
		for _, r := range derivedPassword(testKey, "KubernetesProxy", types.UID(strconv.Itoa(i)), "") {
			counts[r]++
		}
	}
	want := float64(n*generatedPasswordLength) / float64(len(passwordAlphabet))
	for _, r := range passwordAlphabet {
		if got := float64(counts[r]); got < want*0.8 || got > want*1.2 {
			t.Errorf("character %q drawn %v times, want about %v", r, got, want)
		}
	}
}

func TestCredentialStoreGenerated(t *testing.T) {
	mg := &v1alpha1.KubernetesProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: extUID}}
	rotated := mg.DeepCopy()
	rotated.SetAnnotations(map[string]string{commonv1alpha1.AnnotationKeyCredentialsRotation: "1"})
	derived := backend.Credentials{Username: GeneratedUsername, Password: derivedPassword(testKey, v1alpha1.KubernetesProxyKind, extUID, ""), Generated: true}
	legacy := func(controlled bool, data map[string][]byte) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-kubernetesproxy-credentials"}, Data: data}
		if controlled {
			meta.AddOwnerReference(s, meta.AsController(meta.TypedReferenceTo(mg, v1alpha1.KubernetesProxyGroupVersionKind)))
		}
		return s
	}
	stored := map[string][]byte{SecretKeyUsername: []byte(GeneratedUsername), SecretKeyPassword: []byte("written-by-an-earlier-version")}
	cases := map[string]struct {
		reason   string
		mg       *v1alpha1.KubernetesProxy
		objs     []client.Object
		generate bool
		want     backend.Credentials
	}{
		"Derived": {reason: "Without a stored Secret the password is derived from the key and the resource.",
			mg: mg, generate: true, want: derived},
		"Rotated": {reason: "The rotation annotation is part of the password.",
			mg: rotated, generate: true, want: backend.Credentials{Username: GeneratedUsername, Password: derivedPassword(testKey, v1alpha1.KubernetesProxyKind, extUID, "1"), Generated: true}},
		"StoredByEarlierVersion": {reason: "A Secret an earlier version stored, controlled by the resource, keeps its password: an upgrade rotates nothing.",
			mg: mg, objs: []client.Object{legacy(true, stored)}, generate: true,
			want: backend.Credentials{Username: GeneratedUsername, Password: "written-by-an-earlier-version"}},
		"ForeignSecretIgnored": {reason: "A Secret of that name the resource does not control is neither used nor in the way.",
			mg: mg, objs: []client.Object{legacy(false, stored)}, generate: true, want: derived},
		"IncompleteSecretIgnored": {reason: "A stored Secret without a password no longer holds anything up.",
			mg: mg, objs: []client.Object{legacy(true, map[string][]byte{SecretKeyUsername: []byte("x")})}, generate: true, want: derived},
		"ObserveOnly": {reason: "Nothing is derived for a resource whose instance the provider does not make.",
			mg: mg, generate: false, want: backend.Credentials{}},
		"ObserveOnlyStored": {reason: "An observed resource still publishes what an earlier version stored.",
			mg: mg, objs: []client.Object{legacy(true, stored)}, generate: false,
			want: backend.Credentials{Username: GeneratedUsername, Password: "written-by-an-earlier-version"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sch := extScheme(t)
			if err := corev1.AddToScheme(sch); err != nil {
				t.Fatal(err)
			}
			w := &writeCounter{Client: fake.NewClientBuilder().WithScheme(sch).WithObjects(tc.objs...).Build()}
			got, err := NewCredentialStore(w, testKey).Credentials(context.Background(), tc.mg, nil, tc.generate)
			if err != nil {
				t.Fatalf("%s\nCredentials(): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nCredentials(): -want, +got:\n%s", tc.reason, diff)
			}
			if w.n != 0 {
				t.Errorf("%s\nCredentials() wrote %d times: generating credentials writes nothing", tc.reason, w.n)
			}
		})
	}
}

// writeCounter counts the writes through a client.
type writeCounter struct {
	client.Client
	n int
}

func (w *writeCounter) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	w.n++
	return w.Client.Create(ctx, obj, opts...)
}

func (w *writeCounter) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	w.n++
	return w.Client.Update(ctx, obj, opts...)
}

func (w *writeCounter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	w.n++
	return w.Client.Patch(ctx, obj, patch, opts...)
}
