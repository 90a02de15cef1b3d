/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// listPage bounds one List call; List pages through the rest.
const listPage = 500

// kindOf describes one kind of part for Delete.
type kindOf struct {
	kind     string
	resource string
	object   func() client.Object
	list     func() client.ObjectList
}

// deleteOrder lists the kinds with the Deployment last: Observe reports the
// instance gone once the Deployment is, so everything else must be gone by
// then.
func deleteOrder() []kindOf {
	return []kindOf{
		{kindPDB, resPDBs, func() client.Object { return &policyv1.PodDisruptionBudget{} }, func() client.ObjectList { return &policyv1.PodDisruptionBudgetList{} }},
		{kindService, resServices, func() client.Object { return &corev1.Service{} }, func() client.ObjectList { return &corev1.ServiceList{} }},
		{kindConfigMap, resConfigMaps, func() client.Object { return &corev1.ConfigMap{} }, func() client.ObjectList { return &corev1.ConfigMapList{} }},
		{kindSecret, resSecrets, func() client.Object { return &corev1.Secret{} }, func() client.ObjectList { return &corev1.SecretList{} }},
		{kindDeployment, resDeployments, func() client.Object { return &appsv1.Deployment{} }, func() client.ObjectList { return &appsv1.DeploymentList{} }},
	}
}

// Delete deletes every object of the instance that carries d's ownership
// labels, and leaves alone objects of the same name that do not. Without a
// namespace (garbage collection) it finds the objects by their labels in
// every namespace. Pods go with their Deployment, in the background.
func (b *Backend) Delete(ctx context.Context, d backend.Desired[Params]) error {
	b.forgetTraffic(d.Params.Namespace, d.Name)
	for _, k := range deleteOrder() {
		var err error
		if ns := d.Params.Namespace; ns != "" {
			c := call{kind: k.kind, resource: k.resource, namespace: ns, name: d.Name}
			err = b.deleteOwned(ctx, k.object(), d.Ownership, c)
		} else {
			err = b.deleteLabelled(ctx, k, d)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// deleteOwned deletes the object c names when it carries own's labels.
func (b *Backend) deleteOwned(ctx context.Context, obj client.Object, own backend.Ownership, c call) error {
	c.verb = verbGet
	err := b.kube.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name}, obj)
	if kerrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return classify(err, c)
	}
	if !backend.OwnedBy(backend.KubernetesLabelKeys, obj.GetLabels(), own) {
		return nil
	}
	return b.deleteObject(ctx, obj, c)
}

// deleteLabelled deletes the objects of kind k in any namespace that carry
// d's ownership labels and name.
func (b *Backend) deleteLabelled(ctx context.Context, k kindOf, d backend.Desired[Params]) error {
	keys := backend.KubernetesLabelKeys
	l := k.list()
	sel := client.MatchingLabels{
		keys.ManagedBy:        backend.ManagedByValue,
		keys.OwnerUID:         string(d.Ownership.Owner.UID),
		keys.ProviderInstance: d.Ownership.ProviderInstance,
	}
	c := call{verb: verbList, kind: k.kind, resource: k.resource}
	if err := b.kube.List(ctx, l, sel); err != nil {
		return classify(err, c)
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return classify(err, c)
	}
	for _, it := range items {
		obj, ok := it.(client.Object)
		if !ok || obj.GetName() != d.Name {
			continue
		}
		c := call{kind: k.kind, resource: k.resource, namespace: obj.GetNamespace(), name: obj.GetName()}
		if err := b.deleteObject(ctx, obj, c); err != nil {
			return err
		}
	}
	return nil
}

// deleteObject deletes obj unless it was replaced since it was read.
func (b *Backend) deleteObject(ctx context.Context, obj client.Object, c call) error {
	uid := obj.GetUID()
	c.verb = verbDelete
	err := b.kube.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if kerrors.IsNotFound(err) {
		return nil
	}
	return classify(err, c)
}

// List returns every instance of this provider in the cluster, found by the
// managed-by label of their Deployments in every namespace.
func (b *Backend) List(ctx context.Context) ([]backend.Instance, error) {
	var out []backend.Instance
	opts := []client.ListOption{managedDeployments(), client.Limit(listPage)}
	for {
		l := &appsv1.DeploymentList{}
		if err := b.kube.List(ctx, l, opts...); err != nil {
			// Never a partial list: a missing instance would look gone.
			return nil, classify(err, call{verb: verbList, kind: kindDeployment, resource: resDeployments})
		}
		for _, dep := range l.Items {
			own, ok := backend.OwnershipFromLabels(backend.KubernetesLabelKeys, dep.Labels)
			if !ok {
				continue
			}
			in := backend.Instance{
				ID: b.id(dep.Namespace, dep.Name), Name: dep.Name, Ownership: own,
				CreatedAt: dep.CreationTimestamp.Time, State: commonv1alpha1.StatePending,
			}
			if dep.Status.AvailableReplicas > 0 {
				in.State = commonv1alpha1.StateRunning
			}
			out = append(out, in)
		}
		if l.Continue == "" {
			return out, nil
		}
		opts = []client.ListOption{managedDeployments(), client.Limit(listPage), client.Continue(l.Continue)}
	}
}

// CheckHealth lists one proxy Deployment: it fails when the cluster does not
// answer or the credentials cannot list Deployments, which List needs.
func (b *Backend) CheckHealth(ctx context.Context) error {
	err := b.kube.List(ctx, &appsv1.DeploymentList{}, managedDeployments(), client.Limit(1))
	return classify(err, call{verb: verbList, kind: kindDeployment, resource: resDeployments})
}

func managedDeployments() client.MatchingLabels {
	return client.MatchingLabels{backend.KubernetesLabelKeys.ManagedBy: backend.ManagedByValue, LabelName: appName}
}
