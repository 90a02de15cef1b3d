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
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

const (
	// ssaNamespace is where the server-side apply baseline puts its objects.
	ssaNamespace = "bench-baseline-ssa"
	// ssaFieldManager is the server-side apply baseline's field manager.
	ssaFieldManager = "bench-ssa"

	errApplyObject = "cannot build an object to apply"
	errFmtApply    = "cannot apply %s %s"
	errSSAClient   = "cannot create the server-side apply baseline's client"
	errListSSA     = "cannot list the server-side apply baseline's objects"
)

// kubeResources are the resources of the baseline's kinds, for the dynamic
// client.
var kubeResources = map[string]schema.GroupVersionResource{
	"ConfigMap":  corev1.SchemeGroupVersion.WithResource("configmaps"),
	"Secret":     corev1.SchemeGroupVersion.WithResource("secrets"),
	"Deployment": appsv1.SchemeGroupVersion.WithResource("deployments"),
	"Service":    corev1.SchemeGroupVersion.WithResource("services"),
}

// ssaResult is the server-side apply baseline: the POST baseline's objects
// applied instead of created, then every one applied again, unchanged, once:
// what a provider that applies without comparing first sends each poll.
type ssaResult struct {
	// what it does, for the report.
	what               string
	exist, ready       time.Duration
	cpuExist, cpu      float64
	apiExist, apiReady float64
	create             counts
	// reapply are the requests of the one pass over every object;
	// reapplyAPI the apiserver's CPU over the pass, pollAPI over one --poll
	// from the pass's start (the provider's steady window is one poll too).
	reapply             counts
	reapplyTime         time.Duration
	reapplyAPI, pollAPI float64
	// changed of objects: those whose resourceVersion the pass moved (0
	// when the apiserver recognised every apply as a no-op and wrote
	// nothing).
	objects, changed int
}

// ssaBaseline applies, per MR, the four objects of the POST baseline in
// ssaNamespace, at its concurrency and client rate limit, waits until the
// Deployments are available (so that kube-controller-manager,
// kube-scheduler and kwok are done with them), then applies every object
// again.
func (k *kubeBench) ssaBaseline(ctx context.Context, r *runner, watcher kubernetes.Interface) (*ssaResult, error) {
	objs, err := applyObjects(r.o.n)
	if err != nil {
		return nil, err
	}
	cnt := &counter{}
	dyn, err := dynamic.NewForConfig(countedConfig(k.target, r.o.rate, cnt))
	if err != nil {
		return nil, errors.Wrap(err, errSSAClient)
	}
	logf("%s: server-side apply baseline", r.backend)
	res := &ssaResult{
		what: fmt.Sprintf("the same four objects per MR applied (PATCH application/apply-patch+yaml, field manager %s, force) in %s, %d at a time; "+
			"then every object applied again, unchanged, once: a poll of a provider that applies without comparing first", ssaFieldManager, ssaNamespace, r.o.rate),
		objects: 4 * r.o.n,
	}
	api0, cpu0, t0 := markAPIServer(), selfCPU(), time.Now()
	if _, err := applyAll(ctx, dyn, objs, r.o.rate); err != nil {
		return res, err
	}
	res.exist, res.cpuExist, res.apiExist = time.Since(t0), selfCPU()-cpu0, markAPIServer().since(api0)
	if err := waitAvailable(ctx, watcher, ssaNamespace, r.o.n, r.o.timeout); err != nil {
		res.create = cnt.snapshot()
		return res, err
	}
	res.ready, res.cpu, res.apiReady, res.create = time.Since(t0), selfCPU()-cpu0, markAPIServer().since(api0), cnt.snapshot()
	return res, k.reapply(ctx, r, objs, res)
}

// reapply applies every object again, unchanged, once, and then waits for
// the rest of one poll, so that the apiserver's CPU over it compares with
// the provider's steady window (both hold kube-controller-manager's,
// kube-scheduler's and kwok's background load).
func (k *kubeBench) reapply(ctx context.Context, r *runner, objs [][]*unstructured.Unstructured, res *ssaResult) error {
	// The resourceVersions before, read uncounted: kube-controller-manager
	// may have written a Deployment's status since it was applied.
	plain, err := dynamic.NewForConfig(k.target)
	if err != nil {
		return errors.Wrap(err, errSSAClient)
	}
	before, err := resourceVersions(ctx, plain, ssaNamespace)
	if err != nil {
		return err
	}
	cnt := &counter{}
	dyn, err := dynamic.NewForConfig(countedConfig(k.target, r.o.rate, cnt))
	if err != nil {
		return errors.Wrap(err, errSSAClient)
	}
	api0, t0 := markAPIServer(), time.Now()
	after, err := applyAll(ctx, dyn, objs, r.o.rate)
	if err != nil {
		return err
	}
	res.reapplyTime, res.reapplyAPI, res.reapply = time.Since(t0), markAPIServer().since(api0), cnt.snapshot()
	res.changed = changed(objs, before, after)
	select {
	case <-time.After(time.Until(t0.Add(r.o.poll))):
	case <-ctx.Done():
		return ctx.Err()
	}
	res.pollAPI = markAPIServer().since(api0)
	return nil
}

// applyObjects are the objects of n baseline proxies in ssaNamespace, as
// they are applied.
func applyObjects(n int) ([][]*unstructured.Unstructured, error) {
	out := make([][]*unstructured.Unstructured, n)
	for i := range out {
		for _, o := range kubeObjects(ssaNamespace, fmt.Sprintf("ssa-%04d", i)) {
			u, err := toApply(o)
			if err != nil {
				return nil, err
			}
			out[i] = append(out[i], u)
		}
	}
	return out, nil
}

// toApply is typed object o as an apply configuration: with its kind, and
// without the empty fields a typed object encodes.
func toApply(o client.Object) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(o, scheme.Scheme)
	if err != nil {
		return nil, errors.Wrap(err, errApplyObject)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, errors.Wrap(err, errApplyObject)
	}
	u := &unstructured.Unstructured{Object: pruneEmpty(m)}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// pruneEmpty drops, in place, the nulls and empty maps and lists a typed
// object encodes (creationTimestamp: null, status: {}, resources: {}): an
// apply configuration does not send them, and applied they would make the
// field manager own fields it does not set. List items stay where they are.
func pruneEmpty(m map[string]any) map[string]any {
	for k, v := range m {
		v = prune(v)
		if empty(v) {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	return m
}

func prune(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return pruneEmpty(v)
	case []any:
		for i := range v {
			v[i] = prune(v[i])
		}
	}
	return v
}

func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// applyAll applies the objects of every proxy, workers proxies at a time,
// each proxy's in order, and returns their resourceVersions after.
func applyAll(ctx context.Context, dyn dynamic.Interface, objs [][]*unstructured.Unstructured, workers int) ([][]string, error) {
	rvs := make([][]string, len(objs))
	err := parallel(ctx, len(objs), workers, func(ctx context.Context, i int) error {
		for _, u := range objs[i] {
			rv, err := applyObject(ctx, dyn, u)
			if err != nil {
				return err
			}
			rvs[i] = append(rvs[i], rv)
		}
		return nil
	})
	return rvs, err
}

// applyObject is one server-side apply: a PATCH of the object as
// application/apply-patch+yaml, forcing conflicts.
func applyObject(ctx context.Context, dyn dynamic.Interface, u *unstructured.Unstructured) (string, error) {
	gvr, ok := kubeResources[u.GetKind()]
	if !ok {
		return "", errors.New(errUnknownKind)
	}
	out, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: ssaFieldManager, Force: true})
	if err != nil {
		return "", errors.Wrapf(err, errFmtApply, u.GetKind(), u.GetName())
	}
	return out.GetResourceVersion(), nil
}

// resourceVersions are those of the baseline's objects in ns, by objectKey.
func resourceVersions(ctx context.Context, dyn dynamic.Interface, ns string) (map[string]string, error) {
	out := map[string]string{}
	for kind, gvr := range kubeResources {
		l, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, errors.Wrap(err, errListSSA)
		}
		for _, u := range l.Items {
			out[objectKey(kind, u.GetName())] = u.GetResourceVersion()
		}
	}
	return out, nil
}

func objectKey(kind, name string) string { return kind + "/" + name }

// changed counts the objects whose resourceVersion after differs from
// before; after is by proxy, in the order of objs.
func changed(objs [][]*unstructured.Unstructured, before map[string]string, after [][]string) int {
	n := 0
	for i, us := range objs {
		for j, u := range us {
			if j < len(after[i]) && after[i][j] != before[objectKey(u.GetKind(), u.GetName())] {
				n++
			}
		}
	}
	return n
}
