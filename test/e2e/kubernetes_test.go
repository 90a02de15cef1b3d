/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best dot-imported.
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/node"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/traffic"
)

// brokenNamespace is where the broken kubernetes Composition puts proxies:
// a namespace the ClusterProviderConfig does not allow (and that does not
// exist in the target cluster): the provider refuses it before any call.
const brokenNamespace = "no-such-namespace"

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
	instance: kubernetesInstance,
	failure: failureCase{
		what:    "its target namespace is not allowed by the ProviderConfig",
		setup:   applyBrokenKubernetesComposition,
		cleanup: deleteBrokenKubernetesComposition,
		message: And(ContainSubstring(brokenNamespace), ContainSubstring("spec.allowedNamespaces")),
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

// brokenKubernetesComposition is the shipped kubernetes Composition with a
// target namespace that does not exist. It has no backend label, so only a
// claim that selects labelE2E gets it.
const brokenKubernetesComposition = `
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xegressproxies-kubernetes-e2e-broken
  labels:
    egressproxy.io/e2e: kubernetes-broken
spec:
  compositeTypeRef:
    apiVersion: egressproxy.io/v1alpha1
    kind: XEgressProxy
  mode: Pipeline
  pipeline:
  - step: compose-proxy
    functionRef:
      name: egressproxy-function-egressproxy
    input:
      apiVersion: egressproxy.fn.egressproxy.io/v1alpha1
      kind: Input
      backend: kubernetes
      providerConfigRef:
        kind: ClusterProviderConfig
        name: default
      kubernetes:
        namespace: ` + brokenNamespace + `
`

func applyBrokenKubernetesComposition(ctx context.Context) map[string]string {
	Expect(env.c.ApplyYAML(ctx, "broken composition", []byte(brokenKubernetesComposition))).To(Succeed())
	return map[string]string{labelE2E: "kubernetes-broken"}
}

func deleteBrokenKubernetesComposition(ctx context.Context) {
	objs, err := cluster.Decode("broken composition", []byte(brokenKubernetesComposition))
	Expect(err).NotTo(HaveOccurred())
	Expect(client.IgnoreNotFound(env.c.Client.Delete(ctx, objs[0]))).To(Succeed())
}

// trafficKubernetesComposition is the shipped kubernetes Composition with the
// real node's squid image and without the guardrails that forbid private
// destinations, so that a claim can allow one and see squid refuse it
// (denyPrivateDestinations).
const trafficKubernetesComposition = `
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xegressproxies-kubernetes-e2e-traffic
  labels:
    egressproxy.io/e2e: kubernetes-traffic
spec:
  compositeTypeRef:
    apiVersion: egressproxy.io/v1alpha1
    kind: XEgressProxy
  writeConnectionSecretsToNamespace: crossplane-system
  mode: Pipeline
  pipeline:
  - step: compose-proxy
    functionRef:
      name: egressproxy-function-egressproxy
    input:
      apiVersion: egressproxy.fn.egressproxy.io/v1alpha1
      kind: Input
      backend: kubernetes
      providerConfigRef:
        kind: ClusterProviderConfig
        name: default
      kubernetes:
        namespace: ` + cluster.ProxyNamespace + `
        image: %s
`

func applyTrafficKubernetesComposition(ctx context.Context) map[string]string {
	y := fmt.Sprintf(trafficKubernetesComposition, env.c.SquidImage)
	Expect(env.c.ApplyYAML(ctx, "traffic composition", []byte(y))).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		objs, err := cluster.Decode("traffic composition", []byte(y))
		Expect(err).NotTo(HaveOccurred())
		Expect(client.IgnoreNotFound(env.c.Client.Delete(ctx, objs[0]))).To(Succeed())
	})
	return map[string]string{labelE2E: "kubernetes-traffic"}
}
