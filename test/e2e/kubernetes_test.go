/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best dot-imported.
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/node"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/traffic"
)

// brokenKubernetesConfig names the ClusterProviderConfig (and its Secret)
// the broken kubernetes Composition uses: it allows ProxyNamespace, so the
// composition function composes the claim, but its kubeconfig carries a
// token the target cluster does not know, so the provider's calls fail: a
// failure only the backend sees.
const brokenKubernetesConfig = "kubernetes-e2e-broken"

var _ = registerHealth(healthCase{backend: cluster.BackendKubernetes, group: "kubernetes.m.egressproxy.io", broken: brokenKubernetesConfigs})

var _ = describeBackend(backendCase{
	backend: cluster.BackendKubernetes,
	// The proxy pods run on the real node (or, where it cannot run, on
	// kwok's fake nodes), whose ExternalIPs are egress IPs.
	egressIP:    MatchRegexp(`^203\.0\.113\.1[0-9]$`),
	backendGone: kubernetesGone,
	traffic: &trafficCase{
		unavailable:   func() string { return env.c.NoRealNode },
		netns:         func() string { return env.c.Node.NetNS },
		clientCIDR:    func() string { return node.PodSubnet },
		privateOrigin: func() string { return node.BridgeIP },
		composition:   applyTrafficKubernetesComposition,
		resolve: func(ctx context.Context, hp string) (string, error) {
			return traffic.ServiceResolver(env.c.Client)(ctx, hp)
		},
		readyTimeout: readyTimeout,
	},
	instance:  kubernetesInstance,
	accessLog: kubernetesAccessLog,
	failure: failureCase{
		what:    "the target cluster refuses its ProviderConfig's token",
		setup:   applyBrokenKubernetesComposition,
		cleanup: healBrokenKubernetesConfig,
		message: ContainSubstring("the target cluster rejected the provider config's credentials"),
	},
})

// kubernetesGone asserts that no part of the proxy is left in the target
// cluster: the Deployment (and, through garbage collection, its ReplicaSets
// and pods), the Service, the ConfigMap, the Secret and the
// PodDisruptionBudget. The backend labels all of them with the instance name,
// the last part of the instance ID.
func kubernetesGone(ctx context.Context, g Gomega, mr *unstructured.Unstructured) {
	ns := str(mr, "spec", "forProvider", "namespace")
	id := str(mr, "status", "atProvider", "instanceID")
	g.Expect(ns).NotTo(BeEmpty())
	g.Expect(id).NotTo(BeEmpty(), "the deleted managed resource had reported its instance ID")
	sel := client.MatchingLabels{"app.kubernetes.io/instance": id[strings.LastIndex(id, "/")+1:]}
	lists := map[string]client.ObjectList{
		"Deployments": &appsv1.DeploymentList{}, "ReplicaSets": &appsv1.ReplicaSetList{}, "Pods": &corev1.PodList{},
		"Services": &corev1.ServiceList{}, "ConfigMaps": &corev1.ConfigMapList{}, "Secrets": &corev1.SecretList{},
		"PodDisruptionBudgets": &policyv1.PodDisruptionBudgetList{},
	}
	for kind, l := range lists {
		g.Expect(env.c.Client.List(ctx, l, client.InNamespace(ns), sel)).To(Succeed())
		g.Expect(meta.LenList(l)).To(BeZero(), "%s of the proxy left in %s", kind, ns)
	}
}

// kubernetesInstance identifies the proxy's Deployment by its UID and
// creation time, which a live change must keep (a change rolls its pods,
// never replaces it), and asserts that it has as many ready pods as its
// spec asks for: the rollout surges before it stops an old pod.
func kubernetesInstance(ctx context.Context, g Gomega, mr *unstructured.Unstructured) instanceIdentity {
	ns := str(mr, "spec", "forProvider", "namespace")
	id := str(mr, "status", "atProvider", "instanceID")
	dep := &appsv1.Deployment{}
	g.Expect(env.c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: id[strings.LastIndex(id, "/")+1:]}, dep)).To(Succeed())
	g.Expect(dep.Status.ReadyReplicas).To(BeNumerically(">=", ptr.Deref(dep.Spec.Replicas, 1)),
		"Deployment %s/%s has fewer ready pods than its spec", ns, dep.Name)
	return instanceIdentity{ID: string(dep.UID), CreatedAt: dep.CreationTimestamp.UTC().String()}
}

// brokenKubernetesSecret returns the Secret of brokenKubernetesConfig: this
// control plane's kubeconfig, with a token the cluster does not know unless
// good.
func brokenKubernetesSecret(ctx context.Context, good bool) *corev1.Secret {
	s := &corev1.Secret{}
	Expect(env.c.Client.Get(ctx, client.ObjectKey{Namespace: cluster.CrossplaneNamespace, Name: cluster.KubeconfigSecret}, s)).To(Succeed())
	kc := s.Data["kubeconfig"]
	if !good {
		c, err := clientcmd.Load(kc)
		Expect(err).NotTo(HaveOccurred())
		for name := range c.AuthInfos {
			c.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "not-a-token-of-this-cluster"}
		}
		kc, err = clientcmd.Write(*c)
		Expect(err).NotTo(HaveOccurred())
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.CrossplaneNamespace, Name: brokenKubernetesConfig},
		Data:       map[string][]byte{"kubeconfig": kc},
	}
}

// applyBrokenKubernetesComposition creates brokenKubernetesConfig, its
// Secret with the unknown token, and the Composition that uses it. The
// config and the Secret go only once the failing claim is gone (its managed
// resource needs them to be deleted), so their deletion is deferred here,
// before the spec defers the claim's.
func applyBrokenKubernetesComposition(ctx context.Context) map[string]string {
	pc := cluster.KubernetesProviderConfig("ClusterProviderConfig", "", brokenKubernetesConfig, cluster.CrossplaneNamespace)
	Expect(unstructured.SetNestedField(pc.Object, brokenKubernetesConfig, "spec", "credentials", "secretRef", "name")).To(Succeed())
	s := brokenKubernetesSecret(ctx, false)
	Expect(env.c.Client.Create(ctx, s)).To(Succeed(), "Secret of the broken config")
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(env.c.Client.Delete(ctx, s))).To(Succeed())
	})
	Expect(env.c.Client.Create(ctx, pc)).To(Succeed(), "broken config")
	DeferCleanup(func(ctx SpecContext) { deleteAndWait(ctx, pc) })
	return applyComposition(ctx, cluster.BackendKubernetes, "kubernetes-broken", func(input map[string]any) {
		input["providerConfigRef"] = map[string]any{"kind": "ClusterProviderConfig", "name": brokenKubernetesConfig}
	})
}

// healBrokenKubernetesConfig gives the broken config's Secret this cluster's
// own kubeconfig, so that the failing claim's managed resource can be
// deleted: the provider must observe it to delete it.
func healBrokenKubernetesConfig(ctx context.Context) {
	s := &corev1.Secret{}
	err := env.c.Client.Get(ctx, client.ObjectKey{Namespace: cluster.CrossplaneNamespace, Name: brokenKubernetesConfig}, s)
	if err == nil {
		s.Data = brokenKubernetesSecret(ctx, true).Data
		err = env.c.Client.Update(ctx, s)
	}
	Expect(client.IgnoreNotFound(err)).To(Succeed(), "healing the broken config's Secret")
}

// applyTrafficKubernetesComposition applies the shipped kubernetes
// Composition with the real node's squid image and without guardrails
// (applyComposition).
func applyTrafficKubernetesComposition(ctx context.Context) map[string]string {
	return applyComposition(ctx, cluster.BackendKubernetes, "kubernetes-traffic", func(input map[string]any) {
		input["kubernetes"].(map[string]any)["image"] = env.c.SquidImage //nolint:forcetypeassert // The shipped input has the section.
	})
}
