/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"maps"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

const (
	errNoNamespace = "forProvider.namespace is empty: the proxy needs a namespace of the target cluster"
	errHtpasswd    = "cannot write the htpasswd file for the proxy credentials"
)

// RBAC resources of the kinds, for messages.
const (
	resConfigMaps  = "configmaps"
	resSecrets     = "secrets"
	resDeployments = "deployments.apps"
	resServices    = "services"
	resPDBs        = "poddisruptionbudgets.policy"
	resPods        = "pods"
	resNodes       = "nodes"
)

// part is one object of an instance, with how to compare it and how to
// write the fields the backend owns into the live object.
type part[T client.Object] struct {
	kind     string
	resource string
	want     T
	empty    func() T
	diff     func(want, got T) []string
	merge    func(want, got T)
}

// Create creates every object of the instance, adopting those that exist
// and carry d's ownership labels. It does not wait for the pods.
func (b *Backend) Create(ctx context.Context, d backend.Desired[Params]) error {
	w := b.kube
	if r, ok := w.(recording); ok {
		r.create = true
		w = r
	}
	return b.apply(ctx, w, d)
}

// Update makes every object match d: it re-creates missing objects, resets
// the fields the backend owns, and adds or removes the PodDisruptionBudget.
func (b *Backend) Update(ctx context.Context, d backend.Desired[Params]) error {
	return b.apply(ctx, b.kube, d)
}

// apply creates or corrects every object of d through w, the Deployment
// after the ConfigMap and Secret it mounts, so new pods never wait for a
// volume.
func (b *Backend) apply(ctx context.Context, w kube, d backend.Desired[Params]) error {
	if d.Params.Namespace == "" {
		return backend.Permanent(errors.New(errNoNamespace))
	}
	if err := allow(b.policy, d); err != nil {
		return err
	}
	htpasswd, err := b.htpasswd(ctx, d)
	if err != nil {
		return err
	}
	o, err := build(d, htpasswd)
	if err != nil {
		return err
	}
	own := d.Ownership
	user, pw := d.Credentials.Username, d.Credentials.Password
	var cached reader
	if b.watch != nil {
		cached = b.watch
	}
	steps := []func() error{
		func() error { return ensure(ctx, w, cached, own, configMapPart(o.configMap, o.checksum)) },
		func() error { return ensure(ctx, w, cached, own, secretPart(b.verifier, o.secret, user, pw)) },
		func() error { return ensure(ctx, w, cached, own, deploymentPart(o.deployment)) },
		func() error { return ensure(ctx, w, cached, own, servicePart(o.service)) },
		func() error {
			if o.pdb == nil {
				if cached != nil && kerrors.IsNotFound(cached.Get(ctx, client.ObjectKey{Namespace: d.Params.Namespace, Name: d.Name}, &policyv1.PodDisruptionBudget{})) {
					// None of ours (the cache holds all of ours): nothing
					// to delete. A stale miss shows in the next Observe.
					return nil
				}
				return b.deleteOwned(ctx, &policyv1.PodDisruptionBudget{}, own, pdbCall(d.Params.Namespace, d.Name))
			}
			return ensure(ctx, w, cached, own, pdbPart(o.pdb))
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// htpasswd returns the htpasswd file of the instance: the stored one when it
// still accepts the credentials, so its salt and the Secret stay unchanged,
// else a new one. A stale cache costs at most a hash that ensure then finds
// it need not write.
func (b *Backend) htpasswd(ctx context.Context, d backend.Desired[Params]) ([]byte, error) {
	s := &corev1.Secret{}
	err := b.reads.Get(ctx, client.ObjectKey{Namespace: d.Params.Namespace, Name: d.Name}, s)
	if err != nil && !kerrors.IsNotFound(err) {
		return nil, classify(err, call{verb: verbGet, kind: kindSecret, resource: resSecrets, namespace: d.Params.Namespace, name: d.Name})
	}
	if err == nil && b.verifier.HtpasswdMatches(s.Data[keyHtpasswd], d.Credentials.Username, d.Credentials.Password) {
		return s.Data[keyHtpasswd], nil
	}
	h, err := b.verifier.HtpasswdCost(d.Credentials.Username, d.Credentials.Password, backend.HtpasswdCost(d.Credentials))
	// The squid error names the rule broken, never the password.
	return h, backend.Permanent(errors.Wrap(err, errHtpasswd))
}

// ensure creates p.want, or adopts and corrects the object of its name.
// With a watch cache, an object the cache holds as wanted needs no read, and
// a miss is believed (Create finds out otherwise); anything else is read
// again from the API server, whose resource version an Update needs.
func ensure[T client.Object](ctx context.Context, k kube, cached reader, own backend.Ownership, p part[T]) error {
	c := call{kind: p.kind, resource: p.resource, namespace: p.want.GetNamespace(), name: p.want.GetName()}
	key := client.ObjectKeyFromObject(p.want)
	got := p.empty()
	var err error
	if cached != nil {
		err = cached.Get(ctx, key, got)
		switch {
		case err == nil && ownedBy(got, own, p.kind) == nil && len(p.diff(p.want, got)) == 0:
			return nil
		case kerrors.IsNotFound(err):
		default:
			got = p.empty()
			err = k.Get(ctx, key, got)
		}
	} else {
		err = k.Get(ctx, key, got)
	}
	if kerrors.IsNotFound(err) {
		c.verb = verbCreate
		err = k.Create(ctx, p.want.DeepCopyObject().(T)) //nolint:forcetypeassert // DeepCopyObject returns the type it copies.
		if !kerrors.IsAlreadyExists(err) {
			return classify(err, c)
		}
		// Another reconcile created it meanwhile: check it like any other.
		err = k.Get(ctx, key, got)
	}
	if err != nil {
		c.verb = verbGet
		return classify(err, c)
	}
	if err := ownedBy(got, own, p.kind); err != nil {
		return err
	}
	if len(p.diff(p.want, got)) == 0 {
		return nil
	}
	p.merge(p.want, got)
	c.verb = verbUpdate
	return classify(k.Update(ctx, got), c)
}

// ownedBy returns a Permanent error unless o carries the ownership labels
// of own: taking over another resource's object would hand one team's
// proxy to another.
func ownedBy(o client.Object, own backend.Ownership, kind string) error {
	l := o.GetLabels()
	if backend.OwnedBy(backend.KubernetesLabelKeys, l, own) {
		return nil
	}
	return backend.Permanent(errors.Errorf(errFmtNotOurs, kind, o.GetNamespace()+"/"+o.GetName(),
		backend.KubernetesLabelKeys.OwnerUID, l[backend.KubernetesLabelKeys.OwnerUID]))
}

func mergeLabels(want, got client.Object) {
	l := got.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	maps.Copy(l, want.GetLabels())
	got.SetLabels(l)
}

func configMapPart(want *corev1.ConfigMap, sum string) part[*corev1.ConfigMap] {
	return part[*corev1.ConfigMap]{
		kind: kindConfigMap, resource: resConfigMaps, want: want,
		empty: func() *corev1.ConfigMap { return &corev1.ConfigMap{} },
		diff:  func(want, got *corev1.ConfigMap) []string { return diffConfigMap(want, got, sum) },
		merge: func(want, got *corev1.ConfigMap) {
			mergeLabels(want, got)
			got.Data = want.Data
			got.BinaryData = nil
		},
	}
}

func secretPart(v *squid.Verifier, want *corev1.Secret, user, password string) part[*corev1.Secret] {
	return part[*corev1.Secret]{
		kind: kindSecret, resource: resSecrets, want: want,
		empty: func() *corev1.Secret { return &corev1.Secret{} },
		diff:  func(want, got *corev1.Secret) []string { return diffSecret(v, want, got, user, password) },
		merge: func(want, got *corev1.Secret) {
			mergeLabels(want, got)
			got.Data = want.Data
			got.StringData = nil
		},
	}
}

func deploymentPart(want *appsv1.Deployment) part[*appsv1.Deployment] {
	return part[*appsv1.Deployment]{
		kind: kindDeployment, resource: resDeployments, want: want,
		empty: func() *appsv1.Deployment { return &appsv1.Deployment{} },
		diff:  diffDeployment,
		merge: mergeDeployment,
	}
}

func servicePart(want *corev1.Service) part[*corev1.Service] {
	return part[*corev1.Service]{
		kind: kindService, resource: resServices, want: want,
		empty: func() *corev1.Service { return &corev1.Service{} },
		diff:  diffService,
		merge: mergeService,
	}
}

func pdbPart(want *policyv1.PodDisruptionBudget) part[*policyv1.PodDisruptionBudget] {
	return part[*policyv1.PodDisruptionBudget]{
		kind: kindPDB, resource: resPDBs, want: want,
		empty: func() *policyv1.PodDisruptionBudget { return &policyv1.PodDisruptionBudget{} },
		diff:  diffPDB,
		merge: func(want, got *policyv1.PodDisruptionBudget) {
			mergeLabels(want, got)
			got.Spec.MinAvailable = want.Spec.MinAvailable
			got.Spec.MaxUnavailable = nil
			got.Spec.Selector = want.Spec.Selector
		},
	}
}

func pdbCall(ns, name string) call {
	return call{kind: kindPDB, resource: resPDBs, namespace: ns, name: name}
}
