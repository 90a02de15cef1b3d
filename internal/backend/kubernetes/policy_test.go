/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kubernetes/kubernetesdesc"
)

const testConfig = "ClusterProviderConfig default"

func withPolicy(namespaces, images []string) *Policy {
	return &Policy{Config: testConfig, Namespaces: namespaces, Images: images}
}

func TestPolicy(t *testing.T) {
	type want struct {
		class backend.Class
		// phrases the message must hold.
		phrases []string
	}
	refused := func(phrases ...string) want { return want{class: backend.ClassPermanent, phrases: phrases} }
	cases := map[string]struct {
		reason string
		policy *Policy
		d      backend.Desired[Params]
		want   want
	}{
		"NoPolicy": {
			reason: "Without a policy (a backend built by hand) any namespace but the reserved ones goes.",
			d:      desired(),
		},
		"NoPolicyKubeSystem": {
			reason: "kube-system is refused even without a policy.",
			d:      desired(inNamespace("kube-system")),
			want:   refused(`spec.forProvider.namespace "kube-system" is refused`, "any provider config"),
		},
		"AnyNamespaceNotReserved": {
			reason: `"*" does not open kube-node-lease.`,
			policy: withPolicy([]string{AnyNamespace}, nil),
			d:      desired(inNamespace("kube-node-lease")),
			want:   refused(`spec.forProvider.namespace "kube-node-lease" is refused`, testConfig),
		},
		"ListedNotReserved": {
			reason: "Listing kube-public (admission refuses that too) does not open it.",
			policy: withPolicy([]string{"kube-public"}, nil),
			d:      desired(inNamespace("kube-public")),
			want:   refused(`spec.forProvider.namespace "kube-public" is refused`),
		},
		"EmptyOwnNamespace": {
			reason: "An empty allowedNamespaces allows the namespace named like the resource's own.",
			policy: withPolicy(nil, nil),
			d:      desired(inNamespace(testOwnership().Owner.Namespace)),
		},
		"EmptyOtherNamespace": {
			reason: "An empty allowedNamespaces refuses any other namespace, and says which one it allows.",
			policy: withPolicy(nil, nil),
			d:      desired(),
			want: refused(`spec.forProvider.namespace "proxies" is not allowed by ClusterProviderConfig default`,
				`spec.allowedNamespaces is empty, which allows only "team-a"`),
		},
		"Listed": {
			reason: "A listed namespace is allowed.",
			policy: withPolicy([]string{"egress", testNS}, nil),
			d:      desired(),
		},
		"NotListed": {
			reason: "A namespace not in the list is refused, naming the list.",
			policy: withPolicy([]string{"egress"}, nil),
			d:      desired(),
			want:   refused(`spec.forProvider.namespace "proxies"`, `spec.allowedNamespaces allow "egress"`),
		},
		"AnyNamespace": {
			reason: `"*" allows any namespace that is not reserved.`,
			policy: withPolicy([]string{AnyNamespace}, nil),
			d:      desired(),
		},
		"DefaultImage": {
			reason: "An empty allowedImages allows the default image.",
			policy: withPolicy([]string{testNS}, nil),
			d:      desired(),
		},
		"OtherImageByDefault": {
			reason: "An empty allowedImages refuses any other image.",
			policy: withPolicy([]string{testNS}, nil),
			d:      desired(withImage("docker.io/evil/squid:1")),
			want: refused(`spec.forProvider.image "docker.io/evil/squid:1" is not allowed by ClusterProviderConfig default`,
				"spec.allowedImages is empty, which allows only the default image "),
		},
		"Exact": {
			reason: "An exact reference allows that image.",
			policy: withPolicy([]string{testNS}, []string{"registry.example.com/squid:6.10"}),
			d:      desired(withImage("registry.example.com/squid:6.10")),
		},
		"ExactIsNotPrefix": {
			reason: "An entry that ends in no separator is no prefix.",
			policy: withPolicy([]string{testNS}, []string{"registry.example.com/squid"}),
			d:      desired(withImage("registry.example.com/squid-evil:1")),
			want:   refused(`spec.forProvider.image`, `spec.allowedImages allow "registry.example.com/squid"`),
		},
		"DefaultNotImplied": {
			reason: "A list replaces the default: the default image is allowed only when listed.",
			policy: withPolicy([]string{testNS}, []string{"registry.example.com/"}),
			d:      desired(),
			want:   refused(`spec.forProvider.image "` + DefaultImage + `"`),
		},
		"PathPrefix": {
			reason: `A prefix ending in "/" allows every image under it.`,
			policy: withPolicy([]string{testNS}, []string{"registry.example.com/proxies/"}),
			d:      desired(withImage("registry.example.com/proxies/team/squid:6")),
		},
		"TagPrefix": {
			reason: `A prefix ending in ":" allows every tag of one repository.`,
			policy: withPolicy([]string{testNS}, []string{"docker.io/ubuntu/squid:"}),
			d:      desired(withImage("docker.io/ubuntu/squid:6.10-24.10_beta")),
		},
		"DigestPrefix": {
			reason: `A prefix ending in "@" allows every digest of one repository.`,
			policy: withPolicy([]string{testNS}, []string{"docker.io/ubuntu/squid@"}),
			d:      desired(withImage("docker.io/ubuntu/squid@sha256:0123")),
		},
		"TagPrefixIsNotPortPrefix": {
			reason: `A prefix ending in ":" allows no path after it, so a host entry is not every repository on a port.`,
			policy: withPolicy([]string{testNS}, []string{"registry.example.com:"}),
			d:      desired(withImage("registry.example.com:5000/evil:1")),
			want:   refused(`spec.forProvider.image "registry.example.com:5000/evil:1"`),
		},
		"NotNormalised": {
			reason: "References compare as written: a short name is not its docker.io form.",
			policy: withPolicy([]string{testNS}, []string{"docker.io/library/squid:6"}),
			d:      desired(withImage("squid:6")),
			want:   refused(`spec.forProvider.image "squid:6"`),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := allow(tc.policy, tc.d)
			if diff := cmp.Diff(tc.want.class, backend.ClassOf(err)); diff != "" {
				t.Fatalf("%s\nallow(...): -want class, +got:\n%s\n%v", tc.reason, diff, err)
			}
			for _, p := range tc.want.phrases {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("%s\nallow(...) = %q, want it to say %q", tc.reason, err, p)
				}
			}
		})
	}
}

// TestPolicyGuardsTheBackend shows that a refused proxy reaches the target
// cluster with no call, and that an existing one found refused is reported
// not up to date rather than lost, so its resource can still be deleted.
func TestPolicyGuardsTheBackend(t *testing.T) {
	d := desired()
	p := WithPolicy(Policy{Config: testConfig, Namespaces: []string{"egress"}})
	calls := 0
	count := func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
		calls++
		return nil
	}
	get := func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		calls++
		return nil
	}
	b := New(failing(t, interceptor.Funcs{Create: count, Get: get}), p)
	for name, fn := range map[string]func(context.Context, backend.Desired[Params]) error{"Create": b.Create, "Update": b.Update} {
		err := fn(t.Context(), d)
		if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), "spec.forProvider.namespace") {
			t.Errorf("%s of a refused namespace = %v, want a Permanent error naming spec.forProvider.namespace", name, err)
		}
	}
	if calls != 0 {
		t.Errorf("a refused proxy made %d calls to the target cluster, want none", calls)
	}

	// Made before the allowlist changed.
	c := created(t, d)
	o, err := New(c, p).Observe(t.Context(), d)
	if err != nil {
		t.Fatalf("Observe of an existing, now refused proxy: %v; want it found, so it can be deleted", err)
	}
	// The policy is the connector's, before any backend call: Observe,
	// which a resource being deleted still needs, reports the instance as
	// it is, as every backend does.
	if strings.Contains(o.Diff, "is not allowed") {
		t.Errorf("Observe of a refused proxy: Diff %q; want the policy left to the connector", o.Diff)
	}
	if err := New(c, p).Delete(t.Context(), d); err != nil {
		t.Errorf("Delete of a refused proxy: %v; want it deleted", err)
	}
}

// TestKubernetesPolicy checks spec.policy.kubernetes: its defaults, which
// are safe for an untrusted team, and its lists.
func TestKubernetesPolicy(t *testing.T) {
	refused := func(format string, args ...any) error { return backend.Permanent(errors.Errorf(format, args...)) }
	policy := func(k v1alpha1.KubernetesPolicy) *Policy {
		return &Policy{Config: testConfig, Namespaces: []string{AnyNamespace}, KubernetesPolicy: k}
	}
	with := func(mod func(*Params)) desiredMod { return func(d *backend.Desired[Params]) { mod(&d.Params) } }
	controlPlane := corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	egressNode := corev1.Toleration{Key: "egressproxy.io/egress-node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	cases := map[string]struct {
		reason string
		policy *Policy
		d      backend.Desired[Params]
		want   error
	}{
		"Defaults": {
			reason: "A ClusterIP proxy of two replicas, without placement or resources, passes the defaults.",
			policy: policy(v1alpha1.KubernetesPolicy{}),
			d:      desired(),
		},
		"LoadBalancerByDefault": {
			reason: "By default only ClusterIP: a LoadBalancer opens the proxy beyond the cluster.",
			policy: policy(v1alpha1.KubernetesPolicy{}),
			d:      desired(withServiceType(corev1.ServiceTypeLoadBalancer)),
			want:   refused(`spec.forProvider.serviceType "LoadBalancer" is not allowed by ClusterProviderConfig default: its spec.policy.kubernetes.serviceTypes is empty, which allows only "ClusterIP"`),
		},
		"NodePortNotListed": {
			reason: "A listed type list replaces the default.",
			policy: policy(v1alpha1.KubernetesPolicy{ServiceTypes: []corev1.ServiceType{corev1.ServiceTypeLoadBalancer}}),
			d:      desired(withServiceType(corev1.ServiceTypeNodePort)),
			want:   refused(`spec.forProvider.serviceType "NodePort" is not allowed by ClusterProviderConfig default: its spec.policy.kubernetes.serviceTypes allow "LoadBalancer"`),
		},
		"LoadBalancerIPByDefault": {
			reason: "Without spec.policy.kubernetes.loadBalancerIPs no address may be pinned: it may be another team's.",
			policy: policy(v1alpha1.KubernetesPolicy{ServiceTypes: []corev1.ServiceType{corev1.ServiceTypeLoadBalancer}}),
			d:      desired(withServiceType(corev1.ServiceTypeLoadBalancer), with(func(p *Params) { p.LoadBalancerIP = ptr.To("192.0.2.10") })),
			want:   refused(`spec.forProvider.loadBalancerIP "192.0.2.10" is not allowed by ClusterProviderConfig default: its spec.policy.kubernetes.loadBalancerIPs is empty, which allows none`),
		},
		"LoadBalancerIPInRange": {
			reason: "An address in a listed CIDR may be pinned.",
			policy: policy(v1alpha1.KubernetesPolicy{ServiceTypes: []corev1.ServiceType{corev1.ServiceTypeLoadBalancer}, LoadBalancerIPs: []string{"192.0.2.0/28"}}),
			d:      desired(withServiceType(corev1.ServiceTypeLoadBalancer), with(func(p *Params) { p.LoadBalancerIP = ptr.To("192.0.2.10") })),
		},
		"LoadBalancerIPOutOfRange": {
			reason: "An address outside every listed one is refused.",
			policy: policy(v1alpha1.KubernetesPolicy{ServiceTypes: []corev1.ServiceType{corev1.ServiceTypeLoadBalancer}, LoadBalancerIPs: []string{"192.0.2.0/28", "198.51.100.7"}}),
			d:      desired(withServiceType(corev1.ServiceTypeLoadBalancer), with(func(p *Params) { p.LoadBalancerIP = ptr.To("192.0.2.16") })),
			want:   refused(`spec.forProvider.loadBalancerIP "192.0.2.16" is not allowed by ClusterProviderConfig default: its spec.policy.kubernetes.loadBalancerIPs allow "192.0.2.0/28", "198.51.100.7"`),
		},
		"ControlPlaneTolerationByDefault": {
			reason: "By default no toleration may reach the control-plane nodes.",
			policy: policy(v1alpha1.KubernetesPolicy{}),
			d:      desired(with(func(p *Params) { p.Tolerations = []corev1.Toleration{egressNode, controlPlane} })),
			want:   refused(`spec.forProvider.tolerations "node-role.kubernetes.io/control-plane:NoSchedule" is not allowed by ClusterProviderConfig default: its spec.policy.kubernetes.tolerations is empty, which allows none on the control-plane nodes`),
		},
		"TolerateEverythingByDefault": {
			reason: "A key-less Exists tolerates every taint, the control plane's too.",
			policy: policy(v1alpha1.KubernetesPolicy{}),
			d:      desired(with(func(p *Params) { p.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} })),
			want:   refused(`spec.forProvider.tolerations "*:*" is not allowed by ClusterProviderConfig default: its spec.policy.kubernetes.tolerations is empty, which allows none on the control-plane nodes`),
		},
		"OtherTolerationByDefault": {
			reason: "A toleration of another taint goes by default.",
			policy: policy(v1alpha1.KubernetesPolicy{}),
			d:      desired(with(func(p *Params) { p.Tolerations = []corev1.Toleration{egressNode} })),
		},
		"TolerationNotListed": {
			reason: "A list allows exactly its tolerations.",
			policy: policy(v1alpha1.KubernetesPolicy{Tolerations: []corev1.Toleration{egressNode}}),
			d: desired(with(func(p *Params) {
				p.Tolerations = []corev1.Toleration{{Key: "egressproxy.io/egress-node", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
			})),
			want: refused(`spec.forProvider.tolerations "egressproxy.io/egress-node=x:NoSchedule" is not allowed by ClusterProviderConfig default: its spec.policy.kubernetes.tolerations allow "egressproxy.io/egress-node:NoSchedule"`),
		},
		"ControlPlaneSelectorByDefault": {
			reason: "By default no node selector may pick the control-plane nodes.",
			policy: policy(v1alpha1.KubernetesPolicy{}),
			d:      desired(with(func(p *Params) { p.NodeSelector = map[string]string{"node-role.kubernetes.io/control-plane": ""} })),
			want:   refused(`spec.forProvider.nodeSelector "node-role.kubernetes.io/control-plane=" is not allowed by ClusterProviderConfig default: its spec.policy.kubernetes.nodeSelectors is empty, which allows none on the control-plane nodes`),
		},
		"SelectorListed": {
			reason: `A listed "key" allows any value of that label, "key=value" that value.`,
			policy: policy(v1alpha1.KubernetesPolicy{NodeSelectors: []string{"egressproxy.io/egress-node", "zone=a"}}),
			d:      desired(with(func(p *Params) { p.NodeSelector = map[string]string{"egressproxy.io/egress-node": "true", "zone": "a"} })),
		},
		"SelectorValueNotListed": {
			reason: `"key=value" allows no other value.`,
			policy: policy(v1alpha1.KubernetesPolicy{NodeSelectors: []string{"zone=a"}}),
			d:      desired(with(func(p *Params) { p.NodeSelector = map[string]string{"zone": "b"} })),
			want:   refused(`spec.forProvider.nodeSelector "zone=b" is not allowed by ClusterProviderConfig default: its spec.policy.kubernetes.nodeSelectors allow "zone=a"`),
		},
		"ReplicasByDefault": {
			reason: "By default at most 3 replicas.",
			policy: policy(v1alpha1.KubernetesPolicy{}),
			d:      desired(withReplicas(4)),
			want:   refused(`spec.forProvider.replicas 4 is more than ClusterProviderConfig default allows: its spec.policy.kubernetes.maxReplicas is unset, which allows at most 3`),
		},
		"ReplicasCeiling": {
			reason: "maxReplicas replaces the default ceiling.",
			policy: policy(v1alpha1.KubernetesPolicy{MaxReplicas: ptr.To[int32](10)}),
			d:      desired(withReplicas(10)),
		},
		"CPUByDefault": {
			reason: "By default no request or limit above 1 CPU.",
			policy: policy(v1alpha1.KubernetesPolicy{}),
			d: desired(with(func(p *Params) {
				p.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}}
			})),
			want: refused(`spec.forProvider.resources.limits.cpu 64 is more than ClusterProviderConfig default allows: its spec.policy.kubernetes.maxResources.cpu is unset, which allows at most 1`),
		},
		"UnknownResource": {
			reason: "A resource the ceilings do not name may not be asked for.",
			policy: policy(v1alpha1.KubernetesPolicy{}),
			d: desired(with(func(p *Params) {
				p.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}
			})),
			want: refused(`spec.forProvider.resources.requests.nvidia.com/gpu 1 is more than ClusterProviderConfig default allows: its spec.policy.kubernetes.maxResources names no such resource`),
		},
		"ResourcesWithinCeiling": {
			reason: "Requests and limits within maxResources go.",
			policy: policy(v1alpha1.KubernetesPolicy{MaxResources: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}),
			d: desired(with(func(p *Params) {
				p.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}
			})),
		},
		"MemoryAboveCeiling": {
			reason: "A limit above maxResources is refused, naming the ceiling.",
			policy: policy(v1alpha1.KubernetesPolicy{MaxResources: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}),
			d: desired(with(func(p *Params) {
				p.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("3Gi")}}
			})),
			want: refused(`spec.forProvider.resources.limits.memory 3Gi is more than ClusterProviderConfig default allows: its spec.policy.kubernetes.maxResources.memory is 2Gi`),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, allow(tc.policy, tc.d), test.EquateErrors()); diff != "" {
				t.Errorf("%s\nallow(...): -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestDefaultPolicyAllowsComposed checks that what the compositions make
// of each size, with the function's built-in defaults, passes a config
// without spec.policy.kubernetes.
func TestDefaultPolicyAllowsComposed(t *testing.T) {
	p := &Policy{Config: testConfig, Namespaces: []string{AnyNamespace}}
	for _, size := range []string{backend.SizeSmall, backend.SizeMedium, backend.SizeLarge} {
		if err := allow(p, desired(withReplicas(kubernetesdesc.ReplicasFor(size, nil)))); err != nil {
			t.Errorf("size %s: %v", size, err)
		}
	}
}
