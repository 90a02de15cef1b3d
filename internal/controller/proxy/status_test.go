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

func TestQuietStatusUpdate(t *testing.T) {
	stored := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Status:     corev1.PodStatus{Message: "as stored"},
	}
	cases := map[string]struct {
		reason string
		change func(p *corev1.Pod)
		want   int
	}{
		"Unchanged": {
			reason: "A status equal to the stored one at the same resource version is not written.",
			want:   0,
		},
		"StatusChanged": {
			reason: "A changed status is written.",
			change: func(p *corev1.Pod) { p.Status.Message = "changed" },
			want:   1,
		},
		"StaleUnchanged": {
			reason: "An object read at an older resource version with the status the cache holds is not written: it would only conflict.",
			change: func(p *corev1.Pod) { p.ResourceVersion = "1" },
			want:   0,
		},
		"StaleChanged": {
			reason: "An object read at an older resource version with another status is written, so the conflict is not hidden.",
			change: func(p *corev1.Pod) { p.ResourceVersion = "1"; p.Status.Message = "changed" },
			want:   1,
		},
		"Gone": {
			reason: "An object the reader cannot find is written, and the API server answers.",
			change: func(p *corev1.Pod) { p.Name = "gone" },
			want:   1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			updates := 0
			c := fake.NewClientBuilder().WithObjects(stored.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
				SubResourceUpdate: func(_ context.Context, _ client.Client, _ string, _ client.Object, _ ...client.SubResourceUpdateOption) error {
					updates++
					return nil
				},
			}).Build()
			p := &corev1.Pod{}
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(stored), p); err != nil {
				t.Fatal(err)
			}
			if tc.change != nil {
				tc.change(p)
			}
			if err := (quietClient{Client: c}).Status().Update(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, updates); diff != "" {
				t.Errorf("\n%s\nstatus updates: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestQuietStatusRemembersWrites(t *testing.T) {
	stored := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid"},
		Status:     corev1.PodStatus{Message: "A"},
	}
	cases := map[string]struct {
		reason string
		again  string
		want   int
	}{
		"SameAsWritten": {
			reason: "A reconcile that read the resource before the cache saw the last write, and computes that status again, writes nothing.",
			again:  "B",
			want:   1,
		},
		"SameAsCached": {
			reason: "A status equal to the cache's older one, but not to the last write, is written: the cache is behind.",
			again:  "A",
			want:   2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			updates := 0
			// The cache (the fake's store) never sees the writes.
			c := fake.NewClientBuilder().WithObjects(stored.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
				SubResourceUpdate: func(_ context.Context, _ client.Client, _ string, obj client.Object, _ ...client.SubResourceUpdateOption) error {
					updates++
					obj.SetResourceVersion("1000")
					return nil
				},
			}).Build()
			qc := quietClient{Client: c, written: newWrittenStatus()}
			read := func() *corev1.Pod {
				p := &corev1.Pod{}
				if err := c.Get(t.Context(), client.ObjectKeyFromObject(stored), p); err != nil {
					t.Fatal(err)
				}
				return p
			}
			p := read()
			p.Status.Message = "B"
			if err := qc.Status().Update(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			p = read()
			p.Status.Message = tc.again
			if err := qc.Status().Update(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, updates); diff != "" {
				t.Errorf("\n%s\nstatus updates: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestQuietClientCreate(t *testing.T) {
	conn := func(data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "conn"}, Type: resource.SecretTypeConnection, Data: data}
	}
	cases := map[string]struct {
		reason string
		obj    client.Object
		want   int
	}{
		"EmptyConnectionSecret": {
			reason: "A connection Secret with nothing in it is not created: the first details create it.",
			obj:    conn(nil),
			want:   0,
		},
		"ConnectionSecret": {
			reason: "A connection Secret with details is created.",
			obj:    conn(map[string][]byte{"endpoint": []byte("10.0.0.7:3128")}),
			want:   1,
		},
		"OtherSecret": {
			reason: "Any other empty Secret is created.",
			obj:    &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other"}},
			want:   1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			creates := 0
			c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				Create: func(_ context.Context, _ client.WithWatch, _ client.Object, _ ...client.CreateOption) error {
					creates++
					return nil
				},
			}).Build()
			if err := (quietClient{Client: c}).Create(t.Context(), tc.obj); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, creates); diff != "" {
				t.Errorf("\n%s\ncreates: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestUnchangedConnectionDetails runs Observe and crossplane-runtime's own
// publisher, as the managed reconciler does, against a client holding the
// connection Secret: details the Secret already has are not compared or
// sent again; new, changed or refused ones still are.
func TestUnchangedConnectionDetails(t *testing.T) {
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
			reason: "A Secret of this resource with every detail: no details, no patch, the data stays.",
			secret: conn(extUID, details),
			want:   want{details: nil, writes: 0, data: details},
		},
		"PublishedWithMore": {
			reason: "Keys the provider does not write (a merge patch would keep them anyway) change nothing.",
			secret: conn(extUID, func() map[string][]byte { d := maps.Clone(details); d["extra"] = []byte("x"); return d }()),
			want: want{details: nil, writes: 0, data: func() map[string][]byte {
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
			_, err = managed.NewAPILocalSecretPublisher(quietClient{Client: kube}, connScheme(t)).PublishConnection(t.Context(), mg, o.ConnectionDetails)
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
