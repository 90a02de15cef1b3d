/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// contractNamespace holds the contract baseline's managed resources,
	// their connection Secrets and their four objects.
	contractNamespace = "bench-baseline-contract"

	errContractClient = "cannot create the contract baseline's client"
	errContractMRs    = "cannot create the contract baseline's managed resources"
	errContractStatus = "cannot read the status of a proxy the provider made"
)

// contractResult is the contract baseline: the writes crossplane-runtime's
// managed reconciler makes before a new proxy is Synced, made by a plain
// program with no cache, no watch and nothing to decide.
type contractResult struct {
	what               string
	exist              time.Duration
	cpuExist, apiExist float64
	requests           counts
}

// contractBaseline makes, per MR, in contractNamespace, the seven writes a
// new KubernetesProxy costs before it is Synced: the PUT of the MR with its
// finalizer and create-pending annotation (saved before anything exists
// outside, or a deleted MR would leak what Create made), the POST baseline's
// four objects, the connection Secret and the status PUT that says Synced.
// The provider has stopped: nothing reconciles these MRs. They are created
// before the clock starts, as the provider's exist before it starts.
func (k *kubeBench) contractBaseline(ctx context.Context, r *runner) (*contractResult, error) {
	res := &contractResult{
		what: fmt.Sprintf("per MR, the writes before Synced that the managed reconciler's contract asks for: a PUT of the KubernetesProxy (finalizer, external-name and create-pending annotations), "+
			"the POST baseline's four objects, the connection Secret, a status PUT (Synced); %d at a time, with client-go, no cache and no watch; "+
			"not the provider's Normal event, sent on the side", r.o.rate),
	}
	cpCnt, tCnt := &counter{}, &counter{}
	// The API server warns of crossplane-runtime's finalizer name on every
	// PUT.
	cpCfg := countedConfigAs(k.c.Config, r.o.rate, cpCnt, controlPlane)
	cpCfg.WarningHandler = rest.NoWarnings{}
	cp, err := dynamic.NewForConfig(cpCfg)
	if err != nil {
		return nil, errors.Wrap(err, errContractClient)
	}
	cpSecrets, err := kubernetes.NewForConfig(cpCfg)
	if err != nil {
		return nil, errors.Wrap(err, errContractClient)
	}
	target, err := kubernetes.NewForConfig(countedConfigAs(k.target, r.o.rate, tCnt, targetCluster))
	if err != nil {
		return nil, errors.Wrap(err, errContractClient)
	}
	if err := ensureNamespace(ctx, k.c.Client, contractNamespace); err != nil {
		return nil, err
	}
	// The status a proxy the provider made holds, so that the status PUT
	// writes as much; its conditions say Synced, not yet Ready.
	status, err := k.syncedStatus(ctx)
	if err != nil {
		return nil, err
	}
	logf("kubernetes: contract baseline: creating %d managed resources (before the clock)", r.o.n)
	mrs := make([]*unstructured.Unstructured, r.o.n)
	gvr := k.gvk().GroupVersion().WithResource("kubernetesproxies")
	plain, err := dynamic.NewForConfig(k.c.Config)
	if err != nil {
		return nil, errors.Wrap(err, errContractClient)
	}
	if err := parallel(ctx, r.o.n, 10, func(ctx context.Context, i int) error {
		u := k.mr(i)
		u.SetNamespace(contractNamespace)
		out, err := plain.Resource(gvr).Namespace(contractNamespace).Create(ctx, u, metav1.CreateOptions{})
		mrs[i] = out
		return errors.Wrap(err, errContractMRs)
	}); err != nil {
		return res, err
	}
	objs := make([][]client.Object, r.o.n)
	for i := range objs {
		objs[i] = kubeObjects(contractNamespace, fmt.Sprintf("contract-%04d", i))
	}
	logf("kubernetes: contract baseline")
	api0, cpu0, t0 := markAPIServer(), selfCPU(), time.Now()
	err = parallel(ctx, r.o.n, r.o.rate, func(ctx context.Context, i int) error {
		mr := mrs[i]
		meta.AddFinalizer(mr, managed.FinalizerName)
		meta.SetExternalName(mr, mr.GetName())
		meta.SetExternalCreatePending(mr, time.Now())
		mr, err := cp.Resource(gvr).Namespace(contractNamespace).Update(ctx, mr, metav1.UpdateOptions{})
		if err != nil {
			return errors.Wrap(err, "cannot save the create-pending annotation")
		}
		if err := createKubeObjects(ctx, target, objs[i]); err != nil {
			return err
		}
		if _, err := cpSecrets.CoreV1().Secrets(contractNamespace).Create(ctx, connectionSecret(mr), metav1.CreateOptions{}); err != nil {
			return errors.Wrap(err, "cannot create a connection Secret")
		}
		mr.Object["status"] = runtime.DeepCopyJSONValue(status)
		_, err = cp.Resource(gvr).Namespace(contractNamespace).UpdateStatus(ctx, mr, metav1.UpdateOptions{})
		return errors.Wrap(err, "cannot update a status")
	})
	res.exist, res.cpuExist, res.apiExist = time.Since(t0), selfCPU()-cpu0, markAPIServer().since(api0)
	res.requests = counts{}
	for _, c := range []*counter{cpCnt, tCnt} {
		for k, v := range c.snapshot() {
			res.requests[k] += v
		}
	}
	return res, err
}

// syncedStatus is the status of the provider's first proxy with the
// conditions of a proxy just created: Synced, Ready false (Creating).
func (k *kubeBench) syncedStatus(ctx context.Context) (map[string]any, error) {
	u := k.mr(0)
	if err := k.c.Client.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		return nil, errors.Wrap(err, errContractStatus)
	}
	status, _, err := unstructured.NestedMap(u.Object, "status")
	if err != nil {
		return nil, errors.Wrap(err, errContractStatus)
	}
	if status == nil {
		status = map[string]any{}
	}
	var conds []any
	for _, c := range []xpv2.Condition{xpv2.ReconcileSuccess(), xpv2.Creating()} {
		c.LastTransitionTime = metav1.Now()
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
		if err != nil {
			return nil, errors.Wrap(err, errContractStatus)
		}
		conds = append(conds, m)
	}
	status["conditions"] = conds
	return status, nil
}

// connectionSecret is about the connection Secret the provider writes for
// mr: the proxy's URL and credentials.
func connectionSecret(mr *unstructured.Unstructured) *corev1.Secret {
	host := mr.GetName() + "." + contractNamespace + ".svc.cluster.local"
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: mr.GetName() + "-proxy", Namespace: mr.GetNamespace(),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(mr, mr.GroupVersionKind())},
		},
		Type: resource.SecretTypeConnection,
		Data: map[string][]byte{
			"endpoint": []byte(host + ":3128"),
			"port":     []byte("3128"),
			"username": []byte("egressproxy"),
			"password": []byte("a-generated-password-of-32-chars"),
			"url":      []byte("http://egressproxy:a-generated-password-of-32-chars@" + host + ":3128"),
		},
	}
}
