/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// fakeCluster returns a fake target cluster holding objs.
func fakeCluster(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
}

// failing returns a fake cluster whose calls fail as funcs say.
func failing(t *testing.T, funcs interceptor.Funcs) client.Client {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(testScheme(t)).WithInterceptorFuncs(funcs).Build()
}

// created returns a fake cluster in which d was created.
func created(t *testing.T, d backend.Desired[Params]) client.Client {
	t.Helper()
	c := fakeCluster(t)
	if err := New(c).Create(t.Context(), d); err != nil {
		t.Fatalf("Create: %v", err)
	}
	return c
}

// mutation changes a cluster, as a person or a controller would.
type mutation func(t *testing.T, c client.Client)

func key() client.ObjectKey { return client.ObjectKey{Namespace: testNS, Name: testName} }

// edit reads obj, lets fn change it and writes it back.
func edit[T client.Object](obj T, fn func(T)) mutation {
	return func(t *testing.T, c client.Client) {
		t.Helper()
		if err := c.Get(t.Context(), key(), obj); err != nil {
			t.Fatal(err)
		}
		fn(obj)
		if err := c.Update(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

// editStatus is edit for the status subresource.
func editStatus[T client.Object](obj T, fn func(T)) mutation {
	return func(t *testing.T, c client.Client) {
		t.Helper()
		if err := c.Get(t.Context(), key(), obj); err != nil {
			t.Fatal(err)
		}
		fn(obj)
		if err := c.Status().Update(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

func remove(obj client.Object) mutation {
	return func(t *testing.T, c client.Client) {
		t.Helper()
		obj.SetNamespace(testNS)
		obj.SetName(testName)
		if err := c.Delete(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

// available marks the Deployment's rollout done with n available replicas,
// which a kube-controller-manager would do.
func available(n int32) mutation {
	return editStatus(&appsv1.Deployment{}, func(d *appsv1.Deployment) {
		r := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: r, UpdatedReplicas: r, ReadyReplicas: n, AvailableReplicas: n,
		}
	})
}

// createdAgo makes the Deployment d old (the fake client sets no creation
// time).
func createdAgo(d time.Duration) mutation {
	return func(t *testing.T, c client.Client) {
		t.Helper()
		dep := &appsv1.Deployment{}
		if err := c.Get(t.Context(), key(), dep); err != nil {
			t.Fatal(err)
		}
		dep.CreationTimestamp = metav1.NewTime(time.Now().Add(-d))
		if err := c.Update(t.Context(), dep); err != nil {
			t.Fatal(err)
		}
	}
}

// runningPod adds a pod of the instance on node, ready or not.
func runningPod(name, node string, ready bool) mutation {
	return func(t *testing.T, c client.Client) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, Labels: selector(testName)},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: containerName, Image: DefaultImage}}},
		}
		if err := c.Create(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}
		if err := c.Status().Update(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
}

// node adds a node with an external and an internal address.
func node(name, externalIP string) mutation {
	return func(t *testing.T, c client.Client) {
		t.Helper()
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := c.Create(t.Context(), n); err != nil {
			t.Fatal(err)
		}
		n.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "127.0.1.1"},
			{Type: corev1.NodeExternalIP, Address: externalIP},
		}
		if err := c.Status().Update(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
}

// foreign replaces obj by one of the same name that another resource owns.
func foreign(obj client.Object) mutation {
	return func(t *testing.T, c client.Client) {
		t.Helper()
		if err := c.Get(t.Context(), key(), obj); err != nil {
			t.Fatal(err)
		}
		l := obj.GetLabels()
		l[backend.KubernetesLabelKeys.OwnerUID] = "someone-else"
		obj.SetLabels(l)
		if err := c.Update(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

func resourceVersion(t *testing.T, c client.Client, obj client.Object) string {
	t.Helper()
	if err := c.Get(context.Background(), key(), obj); err != nil {
		t.Fatal(err)
	}
	return obj.GetResourceVersion()
}
