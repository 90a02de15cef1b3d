/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"maps"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// TestConnectionDetailsPublished runs Observe and crossplane-runtime's own
// publisher, as the managed reconciler does, against a client holding the
// connection Secret: details the Secret already has are not sent again;
// new, changed or refused ones are.
func TestConnectionDetailsPublished(t *testing.T) {
	mg := extMR(func(mg *v1alpha1.KubernetesProxy) {
		mg.SetWriteConnectionSecretToReference(&xpv2.LocalSecretReference{Name: "web-conn"})
	})
	details := connectionDetails(extEndpoint, alice)
	conn := func(controller types.UID, data map[string][]byte) *corev1.Secret {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-conn"},
			Type:       resource.SecretTypeConnection,
			Data:       data,
		}
		if controller != "" {
			s.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "KubernetesProxy",
				Name: "web", UID: controller, Controller: ptr.To(true)}}
		}
		return s
	}
	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "creds"},
		Data:       map[string][]byte{SecretKeyUsername: []byte(alice.Username), SecretKeyPassword: []byte(alice.Password)},
	}
	rotated := maps.Clone(details)
	rotated[ConnectionPassword] = []byte("old")
	type want struct {
		details managed.ConnectionDetails
		writes  int
		data    map[string][]byte
		err     bool
	}
	cases := map[string]struct {
		reason string
		secret *corev1.Secret
		want   want
	}{
		"Published": {
			reason: "A Secret of this resource with every detail: the publisher finds nothing to write.",
			secret: conn(extUID, details),
			want:   want{details: details, writes: 0, data: details},
		},
		"PublishedWithMore": {
			reason: "Keys the provider does not write are a difference to the publisher: it patches, and the merge patch keeps them.",
			secret: conn(extUID, func() map[string][]byte { d := maps.Clone(details); d["extra"] = []byte("x"); return d }()),
			want: want{details: details, writes: 1, data: func() map[string][]byte {
				d := maps.Clone(details)
				d["extra"] = []byte("x")
				return d
			}()},
		},
		"Changed": {
			reason: "A rotated password is published at once.",
			secret: conn(extUID, rotated),
			want:   want{details: details, writes: 1, data: details},
		},
		"Missing": {
			reason: "A deleted Secret is created again.",
			want:   want{details: details, writes: 1, data: details},
		},
		"AnotherOwner": {
			reason: "A Secret controlled by another resource is never taken: the publisher refuses, as before.",
			secret: conn("another-uid", details),
			want:   want{details: details, writes: 0, data: details, err: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{creds}
			if tc.secret != nil {
				objs = append(objs, tc.secret)
			}
			writes := 0
			kube := fake.NewClientBuilder().WithScheme(connScheme(t)).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					writes++
					return c.Create(ctx, obj, opts...)
				},
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
					writes++
					return c.Patch(ctx, obj, p, opts...)
				},
			}).Build()
			running := backend.Observation[kobs]{State: commonv1alpha1.StateRunning, Ready: true, Endpoint: extEndpoint, UpToDate: true}
			e := NewExternal[*v1alpha1.KubernetesProxy, kparams, kobs](testKind{}, backend.Fns[kparams, kobs]{ObserveFn: observed(alice, running)}, kube, "test", testKey)
			o, err := e.Observe(t.Context(), mg)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want.details, o.ConnectionDetails); diff != "" {
				t.Errorf("\n%s\nObserve(...): -want details, +got:\n%s", tc.reason, diff)
			}
			_, err = managed.NewAPILocalSecretPublisher(kube, connScheme(t)).PublishConnection(t.Context(), mg, o.ConnectionDetails)
			if (err != nil) != tc.want.err {
				t.Errorf("\n%s\nPublishConnection(...): error %v, want error %t", tc.reason, err, tc.want.err)
			}
			if diff := cmp.Diff(tc.want.writes, writes); diff != "" {
				t.Errorf("\n%s\nwrites: -want, +got:\n%s", tc.reason, diff)
			}
			s := &corev1.Secret{}
			if err := kube.Get(t.Context(), types.NamespacedName{Namespace: "team", Name: "web-conn"}, s); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want.data, s.Data); diff != "" {
				t.Errorf("\n%s\nSecret data: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func connScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := extScheme(t)
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}
