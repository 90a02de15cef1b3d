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
)

// The kubernetes backend's setup: its target cluster is this control plane.
const (
	// ProxyNamespace is where the kubernetes Composition runs proxies.
	ProxyNamespace = "egress-proxies"
	// ProviderConfigName is the ClusterProviderConfig every Composition
	// names.
	ProviderConfigName = "default"
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
	kc, err := os.ReadFile(c.Kubeconfig)
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

// adaptComposition applies adapt to the input of every pipeline step of a
// Composition whose input is of backend b, and reports whether there was
// one.
func adaptComposition(u *unstructured.Unstructured, b Backend, adapt func(input map[string]any) error) (bool, error) {
	if u.GetKind() != "Composition" {
		return false, nil
	}
	steps, _, _ := unstructured.NestedSlice(u.Object, "spec", "pipeline")
	found := false
	for i, st := range steps {
		step, _ := st.(map[string]any)
		input, _ := step["input"].(map[string]any)
		if input == nil || input["backend"] != string(b) {
			continue
		}
		if err := adapt(input); err != nil {
			return false, err
		}
		steps[i], found = step, true
	}
	if !found {
		return false, nil
	}
	return true, unstructured.SetNestedSlice(u.Object, steps, "spec", "pipeline")
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
