/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Fake nodes: kwok manages the nodes with this annotation and plays their
// kubelets, so pods on them become Running and Ready without containers.
const (
	annotationKwok = "kwok.x-k8s.io/node"
	// LabelEgressNode is set on every fake node, for a nodeSelector.
	LabelEgressNode = "egressproxy.io/egress-node"

	errFmtCreateNode = "cannot create node %s"
	errNodesReady    = "the fake nodes did not become Ready with their addresses"
	errKwokStart     = "kwok did not start"
)

// NodeName returns the name of fake node i.
func NodeName(i int) string { return fmt.Sprintf("kwok-node-%d", i) }

// NodeExternalIP returns the ExternalIP address of fake node i, from the
// documentation range 203.0.113.0/24: the egress IP of proxies on it.
func NodeExternalIP(i int) string { return fmt.Sprintf("203.0.113.%d", 10+i) }

// nodeAddresses are the addresses of fake node i. kwok keeps addresses it
// finds and only invents them when there are none.
func nodeAddresses(i int) []corev1.NodeAddress {
	return []corev1.NodeAddress{
		{Type: corev1.NodeExternalIP, Address: NodeExternalIP(i)},
		{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.0.2.%d", 10+i)},
		{Type: corev1.NodeHostName, Address: NodeName(i)},
	}
}

func fakeNode(i int) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeName(i),
			Annotations: map[string]string{annotationKwok: "fake"},
			Labels: map[string]string{
				"kubernetes.io/hostname": NodeName(i),
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
				LabelEgressNode:          "true",
			},
		},
		// No taint: the proxy pods carry no toleration unless their
		// Composition asks for one.
		Status: corev1.NodeStatus{Addresses: nodeAddresses(i), Capacity: res, Allocatable: res},
	}
}

// startKwok runs kwok for the fake nodes only. A node lease (40 s) keeps
// the node-lifecycle controller of kube-controller-manager from marking
// the nodes NotReady between kwok's slow status heartbeats.
func (c *Cluster) startKwok() (*Process, error) {
	args := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + annotationKwok + "=fake",
		"--cidr=10.244.0.0/16",
		"--node-ip=192.0.2.1",
		"--node-port=0",
		"--node-lease-duration-seconds=40",
	}
	return c.sup.start("kwok", c.Tools.Kwok, args, nil)
}

// createNodes creates the fake nodes and waits until kwok reports them Ready
// with their ExternalIP addresses.
func (c *Cluster) createNodes(ctx context.Context, kwok *Process) error {
	for i := range c.opts.Nodes {
		n := fakeNode(i)
		if err := c.Client.Create(ctx, n); client.IgnoreAlreadyExists(err) != nil {
			return errors.Wrapf(err, errFmtCreateNode, n.Name)
		}
	}
	return c.waitFor(ctx, kwok, 60*time.Second, errNodesReady, func(ctx context.Context) (bool, error) {
		ready := true
		for i := range c.opts.Nodes {
			ok, err := c.nodeReady(ctx, i)
			if err != nil {
				return false, err
			}
			ready = ready && ok
		}
		return ready, nil
	})
}

// nodeReady reports whether node i is Ready, and puts its addresses back if
// kwok's first status update replaced them.
func (c *Cluster) nodeReady(ctx context.Context, i int) (bool, error) {
	n := &corev1.Node{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: NodeName(i)}, n); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	hasIP := false
	for _, a := range n.Status.Addresses {
		hasIP = hasIP || (a.Type == corev1.NodeExternalIP && a.Address == NodeExternalIP(i))
	}
	if !hasIP {
		p := client.MergeFrom(n.DeepCopy())
		n.Status.Addresses = nodeAddresses(i)
		return false, client.IgnoreNotFound(c.Client.Status().Patch(ctx, n, p))
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}

// startScheduler runs kube-scheduler when it is built, and otherwise binds
// pods to the fake nodes itself.
func (c *Cluster) startScheduler(ctx context.Context) error {
	if c.Tools.KubeScheduler != "" {
		_, err := c.sup.start("kube-scheduler", c.Tools.KubeScheduler,
			[]string{"--kubeconfig=" + c.Kubeconfig, "--leader-elect=false", "--secure-port=0"}, nil)
		return err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return errors.Wrap(err, errClient)
	}
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.stopBinder = cancel
	done := make(chan struct{})
	c.binderDone = done
	go func() {
		defer close(done)
		b := &binder{kube: cs, log: c.logf}
		// Errors are transient (a pod deleted meanwhile): try again.
		_ = wait.PollUntilContextCancel(bctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			b.bindPending(ctx)
			return false, nil
		})
	}()
	return nil
}
