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
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
	kubeenv "github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// TestIntegrationGarbageCollection runs the garbage collector against a
// target cluster that two installations share, and parts nobody (or
// somebody else) labelled: only this installation's orphans go.
func TestIntegrationGarbageCollection(t *testing.T) {
	b, c, ns := realCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	other := kubeenv.Shared(t).Namespace(t, "other")
	ours := "provider-egressproxy-" + string(uuid.NewUUID())
	theirs := "provider-egressproxy-" + string(uuid.NewUUID())
	const alive = types.UID("6a1f0c1e-0000-4000-8000-0000000000aa")

	instance := func(name string, uid types.UID, pi string) backend.Desired[Params] {
		d := desired(inNamespace(ns))
		d.Name = name
		d.Ownership = backend.Ownership{Owner: backend.Owner{UID: uid, Namespace: "team-a", Name: name}, ProviderInstance: pi}
		return d
	}
	orphan := instance("egp-orphan", uuid.NewUUID(), ours)
	half := instance("egp-half", uuid.NewUUID(), ours)
	live := instance("egp-live", alive, ours)
	foreign := instance("egp-foreign", uuid.NewUUID(), theirs)
	for _, d := range []backend.Desired[Params]{orphan, half, live, foreign} {
		step(t, "Create "+d.Name, b.Create(ctx, d))
	}
	// A Create that crashed after the Deployment: no Service yet.
	step(t, "delete the half-created Service", c.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: half.Name}}))

	// Parts GC must leave alone: an unlabelled proxy Deployment, and in
	// another namespace objects named like our orphan, one unlabelled, one
	// with our orphan's owner UID but another installation's instance.
	unlabelled := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "egp-unlabelled", Labels: map[string]string{LabelName: appName}}}
	unlabelled.Spec = appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "unlabelled"}},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "unlabelled"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "squid", Image: DefaultImage}}},
		},
	}
	sameNameSvc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: orphan.Name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 3128}}},
	}
	theirLabels := backend.Ownership{Owner: orphan.Ownership.Owner, ProviderInstance: theirs}.Labels(backend.KubernetesLabelKeys)
	sameNameCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: orphan.Name, Labels: theirLabels}}
	for _, o := range []client.Object{unlabelled, sameNameSvc, sameNameCM} {
		step(t, "create foreign part", c.Create(ctx, o))
	}

	l, err := b.List(ctx)
	step(t, "List", err)
	listed := map[string]backend.Ownership{}
	for _, in := range l {
		listed[in.Name] = in.Ownership
	}
	for _, d := range []backend.Desired[Params]{orphan, half, live, foreign} {
		if got, ok := listed[d.Name]; !ok || got.ProviderInstance != d.Ownership.ProviderInstance || got.Owner.UID != d.Ownership.Owner.UID {
			t.Errorf("List: want %s with its ownership %v, got %v (listed %t)", d.Name, d.Ownership, got, ok)
		}
	}
	if _, ok := listed[unlabelled.Name]; ok {
		t.Errorf("List reports the unlabelled Deployment %s", unlabelled.Name)
	}

	// First with the default minimum age: everything is too young.
	if n, err := collector(t, b, ours, time.Hour).Collect(ctx); err != nil || n != 0 {
		t.Fatalf("Collect with a 1h minimum age: want nothing deleted, got %d, %v", n, err)
	}
	n, err := collector(t, b, ours, 0).Collect(ctx)
	step(t, "Collect", err)
	if n != 2 {
		t.Errorf("Collect deleted %d instances, want 2 (the orphan and the half-created one)", n)
	}

	kinds := map[string]func() client.Object{
		"Deployment": func() client.Object { return &appsv1.Deployment{} },
		"Service":    func() client.Object { return &corev1.Service{} },
		"ConfigMap":  func() client.Object { return &corev1.ConfigMap{} },
		"Secret":     func() client.Object { return &corev1.Secret{} },
	}
	exists := func(kind, ns, name string) bool {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, kinds[kind]())
		if err != nil && !kerrors.IsNotFound(err) {
			t.Fatalf("get %s %s/%s: %v", kind, ns, name, err)
		}
		return err == nil
	}
	for _, d := range []backend.Desired[Params]{orphan, half} {
		for kind := range kinds {
			if exists(kind, ns, d.Name) {
				t.Errorf("%s %s/%s of our orphan is left after GC", kind, ns, d.Name)
			}
		}
	}
	for _, d := range []backend.Desired[Params]{live, foreign} {
		for kind := range kinds {
			if !exists(kind, ns, d.Name) {
				t.Errorf("%s %s/%s was collected: its owner lives or it is another installation's", kind, ns, d.Name)
			}
		}
	}
	for _, p := range []struct{ kind, ns, name string }{
		{"Deployment", ns, unlabelled.Name}, {"Service", other, orphan.Name}, {"ConfigMap", other, orphan.Name},
	} {
		if !exists(p.kind, p.ns, p.name) {
			t.Errorf("%s %s/%s was collected, but it is not ours", p.kind, p.ns, p.name)
		}
	}

	// The package's other tests list the whole cluster: leave nothing.
	for _, d := range []backend.Desired[Params]{live, foreign} {
		step(t, "Delete "+d.Name, b.Delete(ctx, d))
	}
	for _, o := range []client.Object{unlabelled, sameNameSvc, sameNameCM} {
		_ = c.Delete(ctx, o)
	}
}

// collector returns a garbage collector of instance over b, for a control
// plane whose only KubernetesProxy has the UID the live instance names.
func collector(t *testing.T, b *Backend, instance string, minAge time.Duration) *proxy.Collector[Params, Observation] {
	t.Helper()
	s := runtime.NewScheme()
	if err := registry.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&v1alpha1.KubernetesProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "egp-live", UID: "6a1f0c1e-0000-4000-8000-0000000000aa"}},
		&v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
	).Build()
	return proxy.NewCollector(proxy.CollectorConfig[Params, Observation]{
		Backend: "kubernetes",
		Kube:    kube,
		NewBackend: func(context.Context, client.Client, proxy.Config) (backend.Backend[Params, Observation], error) {
			return b, nil
		},
		NewOwners: func() client.ObjectList { return &v1alpha1.KubernetesProxyList{} },
		NewConfigs: func() (client.ObjectList, client.ObjectList) {
			return &v1alpha1.ProviderConfigList{}, &v1alpha1.ClusterProviderConfigList{}
		},
	}, proxy.Options{ProviderInstance: instance, GCMinAge: minAge, GCInterval: time.Minute})
}
