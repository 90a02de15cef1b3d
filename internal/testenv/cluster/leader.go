/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ProviderLease is the Lease the provider's replicas elect their leader
// with (cmd/provider --leader-election), in Crossplane's namespace.
const ProviderLease = "crossplane-leader-election-provider-egressproxy"

// ProviderLeader returns the provider's Lease and the running pod of the
// provider's revision that holds it, or a nil pod: no leader election (the
// default runtime), or a Lease released, or held by a pod that is gone.
// The Lease is nil, with no error, when there is none.
func (c *Cluster) ProviderLeader(ctx context.Context) (*coordinationv1.Lease, *corev1.Pod, error) {
	l := &coordinationv1.Lease{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: CrossplaneNamespace, Name: ProviderLease}, l); err != nil {
		return nil, nil, client.IgnoreNotFound(err)
	}
	holder := HolderPod(l)
	if holder == "" {
		return l, nil, nil
	}
	pods, err := c.ProviderPods(ctx)
	if err != nil {
		return l, nil, err
	}
	for i := range pods {
		if pods[i].Name == holder && pods[i].DeletionTimestamp == nil && pods[i].Status.Phase == corev1.PodRunning {
			return l, &pods[i], nil
		}
	}
	return l, nil, nil
}

// HolderPod returns the name of the pod whose replica holds l, or "".
// controller-runtime's identity is the host name, a pod's name, then "_"
// and a UUID of the process: a restarted container is a new identity of
// the same pod.
func HolderPod(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	pod, _, _ := strings.Cut(*l.Spec.HolderIdentity, "_")
	return pod
}
