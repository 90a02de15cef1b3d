/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"os"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/backend/kubernetes/kubernetesdesc"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/node"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/traffic"
)

// BackendKubernetes is the kubernetes backend.
const BackendKubernetes = Backend(kubernetesdesc.Name)

// Its test double is this control plane, its target cluster, with a real
// node where one can run.
var _ = registerDouble(BackendKubernetes, double{
	always: true,
	step: func(c *Cluster) step {
		return step{name: "kubernetes backend ProviderConfig", fn: c.setupKubernetesBackend}
	},
	adaptInput: kubernetesInput,
	// On the real node (kwok's fake nodes run no pod).
	site: func(c *Cluster) (TrafficSite, bool) {
		if c.Node == nil {
			return TrafficSite{}, false
		}
		return TrafficSite{NetNS: c.Node.NetNS, ClientCIDR: node.PodSubnet, Resolve: traffic.ServiceResolver(c.Client)}, true
	},
})

// The kubernetes backend's setup: its target cluster is this control plane.
const (
	// ProxyNamespace is where the kubernetes Composition runs proxies.
	ProxyNamespace = "egress-proxies"
	// KubeconfigSecret holds a kubeconfig of this control plane, in
	// CrossplaneNamespace, for the kubernetes backend's ProviderConfigs.
	KubeconfigSecret = "local-kubeconfig"

	errKubeconfig = "cannot read the control plane's kubeconfig"
	errKubeSecret = "cannot create the kubeconfig Secret of the kubernetes backend"
)

// setupKubernetesBackend creates the proxies' namespace, a Secret with a
// kubeconfig of this control plane and the ClusterProviderConfig default
// of the kubernetes backend that reads it.
func (c *Cluster) setupKubernetesBackend(ctx context.Context) error {
	if err := ensureNamespace(ctx, c.Client, ProxyNamespace); err != nil {
		return err
	}
	// The provider runs as a pod: it reaches this cluster as pods do,
	// at https://kubernetes.default.svc.
	kc, err := os.ReadFile(c.InClusterKubeconfig)
	if err != nil {
		return errors.Wrap(err, errKubeconfig)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: CrossplaneNamespace, Name: KubeconfigSecret},
		Data:       map[string][]byte{"kubeconfig": kc},
	}
	if err := c.Client.Create(ctx, s); client.IgnoreAlreadyExists(err) != nil {
		return errors.Wrap(err, errKubeSecret)
	}
	pc := KubernetesProviderConfig("ClusterProviderConfig", "", ProviderConfigName, CrossplaneNamespace)
	if c.SquidImage != "" {
		// The real node has the squid image hack/squid-image.sh built and
		// no registry: the Configurations' Compositions name that image
		// (writeOverlay), which the config must allow.
		if err := unstructured.SetNestedStringSlice(pc.Object, []string{c.SquidImage}, "spec", "allowedImages"); err != nil {
			return err
		}
	}
	return Apply(ctx, c.Client, pc)
}

// kubernetesInput makes the proxies run the squid image the real node has
// (it has no registry); kwok's fake nodes run any image.
func kubernetesInput(c *Cluster, input map[string]any) error {
	if c.SquidImage == "" {
		return nil
	}
	return unstructured.SetNestedField(input, c.SquidImage, "kubernetes", "image")
}

// KubernetesProviderConfig returns a (Cluster)ProviderConfig of the
// kubernetes backend whose target is this control plane, through the
// kubeconfig Secret in secretNamespace.
func KubernetesProviderConfig(kind, namespace, name, secretNamespace string) *unstructured.Unstructured {
	ref := map[string]any{"name": KubeconfigSecret, "key": "kubeconfig"}
	if kind == "ClusterProviderConfig" {
		ref["namespace"] = secretNamespace
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubernetes.m.egressproxy.io/v1alpha1",
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"credentials": map[string]any{"source": "Secret", "secretRef": ref},
			// The Compositions put the proxies in ProxyNamespace, which an
			// empty list (the claim's namespace only) would refuse.
			"allowedNamespaces": []any{ProxyNamespace},
		},
	}}
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u
}
