/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// A binder stands in for kube-scheduler: it binds each
// pending pod to a fake node that matches its nodeSelector and whose taints
// it tolerates, spreading pods round robin. That is all the proxies need:
// their pods go where their Deployment's nodeSelector and tolerations allow.
type binder struct {
	kube kubernetes.Interface
	log  func(format string, args ...any)
	next int
}

// bindPending binds every pod that has no node yet.
func (b *binder) bindPending(ctx context.Context) {
	pods, err := b.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName="})
	if err != nil || len(pods.Items) == 0 {
		return
	}
	nodes, err := b.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || (p.Spec.SchedulerName != "" && p.Spec.SchedulerName != corev1.DefaultSchedulerName) {
			continue
		}
		n := b.pick(p, nodes.Items)
		if n == "" {
			continue
		}
		bnd := &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: n},
		}
		if err := b.kube.CoreV1().Pods(p.Namespace).Bind(ctx, bnd, metav1.CreateOptions{}); err != nil {
			b.log("binder: cannot bind pod %s/%s to %s: %v", p.Namespace, p.Name, n, err)
		}
	}
}

// pick returns the next node, round robin, that fits the pod, or "".
func (b *binder) pick(p *corev1.Pod, nodes []corev1.Node) string {
	for range nodes {
		n := &nodes[b.next%len(nodes)]
		b.next++
		if fits(p, n) {
			return n.Name
		}
	}
	return ""
}

// fits reports whether the pod's nodeSelector matches the node and it
// tolerates the node's NoSchedule and NoExecute taints.
func fits(p *corev1.Pod, n *corev1.Node) bool {
	for k, v := range p.Spec.NodeSelector {
		if n.Labels[k] != v {
			return false
		}
	}
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		tolerated := false
		for j := range p.Spec.Tolerations {
			tolerated = tolerated || p.Spec.Tolerations[j].ToleratesTaint(klog.Background(), t, false)
		}
		if !tolerated {
			return false
		}
	}
	return true
}
