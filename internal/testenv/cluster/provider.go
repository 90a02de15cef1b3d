/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

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

	errProviderReady = "the provider did not become ready"

	// flagKVMBootDevices is the provider flag that orders the boot devices
	// of KVM proxies (libvirt.WithBootDevices).
	flagKVMBootDevices = "kvm-boot-devices"
	errKubeconfig      = "cannot read the control plane's kubeconfig"
	errKubeSecret      = "cannot create the kubeconfig Secret of the kubernetes backend"
)

// startProvider runs cmd/provider against the control plane.
func (c *Cluster) startProvider(ctx context.Context) error {
	metrics, err := freePort()
	if err != nil {
		return err
	}
	health, err := freePort()
	if err != nil {
		return err
	}
	args := []string{
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", health),
		// Poll often: the provider watches no backend, so a proxy that
		// becomes available is only seen at the next poll.
		"--poll=5s",
		"--timeout=30s",
	}
	if c.hasProviderFlag(ctx, flagKVMBootDevices) {
		// The sandbox's base image is blank: a VM gets its DHCP lease,
		// which makes it Ready, from the network boot firmware.
		// It has no guest agent and no squid either: Ready can only mean
		// running with a lease there (the real guest's serving is shown by
		// internal/backend/libvirt's TestRealGuestServesTraffic).
		args = append(args, "--"+flagKVMBootDevices+"=network,hd", "--no-kvm-serve-probe")
		c.KVMNetworkBoot = true
	}
	if c.opts.Debug {
		args = append(args, "--debug")
	}
	p, err := c.sup.start("provider", c.Bin.Provider, append(args, c.opts.ProviderArgs...), []string{"KUBECONFIG=" + c.Kubeconfig})
	if err != nil {
		return err
	}
	c.ProviderMetricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", health)
	return c.waitFor(ctx, p, 60*time.Second, errProviderReady, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, url), nil
	})
}

// hasProviderFlag reports whether the provider's --help lists a flag.
func (c *Cluster) hasProviderFlag(ctx context.Context, name string) bool {
	out, _ := exec.CommandContext(ctx, c.Bin.Provider, "--help").CombinedOutput()
	return strings.Contains(string(out), "--"+name+"=") || strings.Contains(string(out), "--"+name+" ")
}

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
	return Apply(ctx, c.Client, KubernetesProviderConfig("ClusterProviderConfig", "", ProviderConfigName, CrossplaneNamespace))
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
