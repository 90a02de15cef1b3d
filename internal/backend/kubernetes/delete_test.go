/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// remaining returns the kinds of the instance's objects that still exist.
func remaining(t *testing.T, c client.Client) []string {
	t.Helper()
	var out []string
	for _, k := range deleteOrder() {
		err := c.Get(t.Context(), key(), k.object())
		switch {
		case err == nil:
			out = append(out, k.kind)
		case !kerrors.IsNotFound(err):
			t.Fatal(err)
		}
	}
	return out
}

func TestDelete(t *testing.T) {
	gc := func(d *backend.Desired[Params]) {
		// What the garbage collector knows of an instance List found.
		*d = backend.Desired[Params]{Name: d.Name, Ownership: d.Ownership}
	}
	cases := map[string]struct {
		reason string
		create bool
		mutate []mutation
		delete backend.Desired[Params]
		want   []string
	}{
		"All": {
			reason: "Delete removes every object of the instance.",
			create: true, delete: desired(),
		},
		"Missing": {
			reason: "Deleting a missing instance succeeds.",
			delete: desired(),
		},
		"Partial": {
			reason: "Delete finishes a deletion that stopped half way.",
			create: true, mutate: []mutation{remove(&corev1.Service{}), remove(&corev1.ConfigMap{})},
			delete: desired(),
		},
		"GarbageCollector": {
			reason: "With only Name and Ownership, Delete finds the objects by their labels.",
			create: true, delete: desired(gc),
		},
		"OtherOwner": {
			reason: "Objects of the same name that another resource owns are left alone.",
			create: true, mutate: []mutation{foreign(&corev1.Service{})},
			delete: desired(), want: []string{kindService},
		},
		"OtherOwnerGarbageCollector": {
			reason: "The label search never matches another resource's objects either.",
			create: true, mutate: []mutation{foreign(&appsv1.Deployment{})},
			delete: desired(gc), want: []string{kindDeployment},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fakeCluster(t)
			if tc.create {
				c = created(t, desired())
			}
			for _, m := range tc.mutate {
				m(t, c)
			}
			for i := range 2 {
				if err := New(c).Delete(t.Context(), tc.delete); err != nil {
					t.Fatalf("%s\nDelete #%d: %v", tc.reason, i+1, err)
				}
			}
			if diff := cmp.Diff(tc.want, remaining(t, c)); diff != "" {
				t.Errorf("%s\nremaining objects: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDeleteOrder(t *testing.T) {
	var kinds []string
	c := created(t, desired())
	c = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			kinds = append(kinds, reflect.TypeOf(obj).Elem().Name())
			return c.Delete(ctx, obj, opts...)
		},
	})
	if err := New(c).Delete(t.Context(), desired()); err != nil {
		t.Fatal(err)
	}
	want := []string{kindPDB, kindService, kindConfigMap, kindSecret, kindDeployment}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("the Deployment must go last, as Observe reports the instance gone with it: -want, +got:\n%s", diff)
	}
}

func TestList(t *testing.T) {
	other := testOwnership()
	other.Owner.UID = "6a1f0c1e-0000-4000-8000-000000000002"
	c := created(t, desired())
	if err := New(c).Create(t.Context(), desired(func(d *backend.Desired[Params]) {
		d.Params.Namespace = "elsewhere"
		d.Name = "egp-other"
		d.Ownership = other
	})); err != nil {
		t.Fatal(err)
	}
	unrelated := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "web", Labels: map[string]string{"app": "web"}}}
	if err := c.Create(t.Context(), unrelated); err != nil {
		t.Fatal(err)
	}
	available(1)(t, c)

	got, err := New(c, WithClusterID("c1")).List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []backend.Instance{
		{ID: "kubernetes://c1/elsewhere/egp-other", Name: "egp-other", Ownership: other, State: commonv1alpha1.StatePending},
		{ID: "kubernetes://c1/proxies/" + testName, Name: testName, Ownership: testOwnership(), State: commonv1alpha1.StateRunning},
	}
	sortByID := cmpopts.SortSlices(func(a, b backend.Instance) bool { return a.ID < b.ID })
	if diff := cmp.Diff(want, got, sortByID, cmpopts.IgnoreFields(backend.Instance{}, "CreatedAt")); diff != "" {
		t.Errorf("List(): -want, +got:\n%s", diff)
	}
}

func TestListFailsAsAWhole(t *testing.T) {
	c := failing(t, interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return kerrors.NewServiceUnavailable("etcd")
	}})
	got, err := New(c).List(t.Context())
	if got != nil || backend.ClassOf(err) != backend.ClassTransient {
		t.Errorf("List() = %v, %v; want nil and a Transient error", got, err)
	}
	if err := New(c).CheckHealth(t.Context()); backend.ClassOf(err) != backend.ClassTransient {
		t.Errorf("CheckHealth() = %v, want a Transient error", err)
	}
}
