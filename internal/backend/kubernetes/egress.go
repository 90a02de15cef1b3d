/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const kindPod, kindNode = "Pod", "Node"

// egressIPs returns the sorted ExternalIP addresses of the nodes that run a
// ready pod of the instance: proxied traffic leaves from them (unless the
// cluster routes egress elsewhere, which no API shows). It also returns
// podProblem of the instance's pods, from the same list, and the list.
func (b *Backend) egressIPs(ctx context.Context, ns, name string) ([]string, string, []*corev1.Pod, error) {
	pods, err := b.podsOf(ctx, ns, name)
	if err != nil {
		return nil, "", nil, classify(err, call{verb: verbList, kind: kindPod, resource: resPods, namespace: ns})
	}
	var nodes []string
	for _, p := range pods {
		if p.Spec.NodeName != "" && podReady(p) && !slices.Contains(nodes, p.Spec.NodeName) {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	var ips []string
	for _, n := range nodes {
		node := &corev1.Node{}
		err := b.reads.Get(ctx, client.ObjectKey{Name: n}, node, readOnly)
		if kerrors.IsNotFound(err) {
			// Deleted since the pod was listed; its pod is going too.
			continue
		}
		if err != nil {
			return nil, "", nil, classify(err, call{verb: verbGet, kind: kindNode, resource: resNodes, name: n})
		}
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeExternalIP && a.Address != "" {
				ips = append(ips, a.Address)
			}
		}
	}
	slices.Sort(ips)
	return slices.Compact(ips), podProblem(pods), pods, nil
}

// podsOf returns the pods of instance ns/name, read only.
func (b *Backend) podsOf(ctx context.Context, ns, name string) ([]*corev1.Pod, error) {
	if b.watch != nil {
		if pods, ok := b.watch.instancePods(ctx, ns, name); ok {
			return pods, nil
		}
	}
	list := &corev1.PodList{}
	if err := b.reads.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(selector(name)), readOnly); err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return pods, nil
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
