/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/node"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/traffic"
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

// A real node: a kubelet, containerd and runc in network and mount
// namespaces of their own (package node), where KubernetesProxy pods run
// squid with their real readiness probe.
const (
	// RealNodeName is the name of the real node.
	RealNodeName = "egressproxy-node"
	// taintUninitialized is the taint a kubelet with an external cloud
	// provider puts on its node until that provider initialises it.
	taintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

	errFmtNode   = "cannot start a real node: %s"
	errRealReady = "the real node did not become Ready with its addresses"
)

// newRealNode makes the real node's namespaces and starts its containerd,
// with package traffic's addresses in its network namespace; the control
// plane then starts inside it (startNodeControlPlane), and the kubelet last
// (startKubelet). Where no real node can run (no root, containerd or
// images) it sets NoRealNode and fails with ErrMissing: Crossplane and the
// packages run as pods, which need a node (StartBare runs kwok's fake
// nodes for what needs none).
func (c *Cluster) newRealNode(ctx context.Context) error {
	err := c.newNode(ctx)
	if errors.Is(err, ErrMissing) {
		c.NoRealNode = err.Error()
	}
	return err
}

func (c *Cluster) newNode(ctx context.Context) (err error) {
	t := testenv.NewOutside("node", c.logf)
	defer c.recoverOutside(t, &err, errFmtNode)
	if os.Geteuid() != 0 {
		testenv.Missing(t, "a real node needs root")
	}
	kubelet := cached("kubelet")
	if kubelet == "" {
		testenv.Missing(t, "the kubelet is not built (hack/tools.sh build kubelet)")
	}
	images := node.FindImages(t)
	n := node.New(ctx, t, node.Config{
		Name: RealNodeName, Kubelet: kubelet, Images: images, LogDir: c.LogDir, ClusterDNS: ClusterDNS,
		Registries:  map[string]string{c.RegistryHost: c.registry.CAFile},
		KubeletArgs: []string{"--cloud-provider=external"},
	})
	// The pods and containerd's shims are no children of this process:
	// if this one dies, the watchdog stops them.
	if cmd := n.AbortCommand(); cmd != "" {
		c.sup.onAbort(cmd)
	}
	if err := traffic.AddAddresses(n.NetNS, traffic.AllowedOrigin, traffic.OtherOrigin, traffic.StableOrigin, traffic.OutsideClient); err != nil {
		return err
	}
	c.Node, c.SquidImage = n, images.Squid
	return c.exposeRegistry()
}

// startKubelet starts the real node's kubelet and waits until the node is
// Ready. The kubelet runs with an external cloud provider, so it keeps the
// addresses the harness gives the node: the harness plays the cloud's node
// controller, as kwok does for fake nodes, and the node's ExternalIP is the
// egress IP a cloud would report (NodeExternalIP(0)).
func (c *Cluster) startKubelet(ctx context.Context) error {
	if err := c.Node.StartKubelet(); err != nil {
		return err
	}
	err := c.waitFor(ctx, nil, 90*time.Second, errRealReady, c.initializeRealNode)
	if err != nil {
		err = errors.Errorf("%v\nkubelet:\n%s", err, c.Node.Log("kubelet", 30))
	}
	return err
}

// initializeRealNode gives the real node its addresses and lifts the
// uninitialized taint, as a cloud's node controller would, and reports
// whether the node is Ready.
func (c *Cluster) initializeRealNode(ctx context.Context) (bool, error) {
	n := &corev1.Node{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: RealNodeName}, n); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	addrs := []corev1.NodeAddress{
		{Type: corev1.NodeExternalIP, Address: NodeExternalIP(0)},
		{Type: corev1.NodeInternalIP, Address: node.BridgeIP},
		{Type: corev1.NodeHostName, Address: RealNodeName},
	}
	if !equality.Semantic.DeepEqual(n.Status.Addresses, addrs) {
		p := client.MergeFrom(n.DeepCopy())
		n.Status.Addresses = addrs
		return false, client.IgnoreNotFound(c.Client.Status().Patch(ctx, n, p))
	}
	taints := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool { return t.Key == taintUninitialized })
	if len(taints) != len(n.Spec.Taints) {
		p := client.MergeFrom(n.DeepCopy())
		n.Spec.Taints = taints
		return false, client.IgnoreNotFound(c.Client.Patch(ctx, n, p))
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}
