/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	kubernetesv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
)

// AnyNamespace in Kubernetes.Namespaces allows every namespace but the reserved
// ones.
const AnyNamespace = "*"

const (
	fieldNamespace         = "spec.forProvider.namespace"
	fieldImage             = "spec.forProvider.image"
	fieldAllowedNamespaces = "spec.allowedNamespaces"
	fieldAllowedImages     = "spec.allowedImages"
	fieldServiceType       = "spec.forProvider.serviceType"
	fieldLoadBalancerIP    = "spec.forProvider.loadBalancerIP"
	fieldTolerations       = "spec.forProvider.tolerations"
	fieldNodeSelector      = "spec.forProvider.nodeSelector"
	fieldReplicas          = "spec.forProvider.replicas"
	fieldResources         = "spec.forProvider.resources"
	policyPrefix           = "spec.policy.kubernetes."

	errFmtReserved     = "%s %q is refused: kube-system, kube-public and kube-node-lease are reserved for the cluster, whatever %s allows"
	errFmtNotAllowed   = "%s %q is not allowed by %s: its %s %s"
	msgFmtOwnNamespace = "is empty, which allows only %q, the managed resource's own namespace"
	msgFmtDefaultImage = "is empty, which allows only the default image %q"
	msgAllow           = "allow "

	errFmtCeiling     = "%s %s is more than %s allows: its %s %s"
	msgFmtDefaultMax  = "is unset, which allows at most %s"
	msgFmtMax         = "is %s"
	msgFmtDefaultOne  = "is empty, which allows only %q"
	msgKubernetesNone = "is empty, which allows none"
	msgControlPlane   = "is empty, which allows none on the control-plane nodes"
	msgNoResource     = "names no such resource"
)

// Defaults of a KubernetesPolicy's empty fields: what is safe for an
// untrusted team.
var (
	// KubernetesDefaultServiceType is the only Service type allowed by default: one
	// that does not open the proxy beyond the cluster.
	KubernetesDefaultServiceType = corev1.ServiceTypeClusterIP
	// KubernetesDefaultMaxReplicas bounds the replicas of a proxy.
	KubernetesDefaultMaxReplicas int32 = 3
	// KubernetesDefaultMaxResources bound every request and limit of the proxy
	// container.
	KubernetesDefaultMaxResources = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1"),
		corev1.ResourceMemory: resource.MustParse("1Gi"),
	}
)

// controlPlaneTaints are the taints that keep workloads off control-plane
// nodes, and their labels the node selectors that pick those nodes. A proxy
// there would run next to the API server and etcd.
var controlPlaneTaints = []corev1.Taint{
	{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
	{Key: "node-role.kubernetes.io/master", Effect: corev1.TaintEffectNoSchedule},
}

// reservedNamespaces hold the cluster's own workloads and data. A proxy there
// would run next to them with whatever the namespace grants, so no provider
// config can allow them.
var reservedNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

// Kubernetes is what a provider config lets the proxies that use it ask of
// the target cluster. The zero Kubernetes allows only the managed
// resource's own namespace name and the default image.
type Kubernetes struct {
	// Config names the provider config in messages, as "ClusterProviderConfig
	// default" or "ProviderConfig team-a/target".
	Config string
	// Namespaces the proxies may run in: names, or AnyNamespace. Empty allows
	// only the namespace named like the managed resource's.
	Namespaces []string
	// Images the proxies may run: exact references, or prefixes ending in
	// "/", ":" or "@" (see imageAllowed). Empty allows only DefaultImage.
	Images []string
	// KubernetesPolicy is the config's spec.policy.kubernetes: Service
	// types, load balancer IPs, tolerations, node selectors and ceilings.
	kubernetesv1alpha1.KubernetesPolicy
}

// KubernetesOf returns the kubernetes policy of a config's spec, named
// config.
func KubernetesOf(spec kubernetesv1alpha1.ProviderConfigSpec, config string) Kubernetes {
	k := Kubernetes{Config: config, Namespaces: spec.AllowedNamespaces, Images: spec.AllowedImages}
	if spec.Policy.Kubernetes != nil {
		k.KubernetesPolicy = *spec.Policy.Kubernetes
	}
	return k
}

// Violation returns why p refuses params, a KubernetesProxy's
// spec.forProvider in namespace own, naming the field and the config, or
// "" (the first rule it breaks). A nil p refuses only the reserved
// namespaces. It makes no call.
func (p *Kubernetes) Violation(params kubernetesv1alpha1.KubernetesProxyParameters, own string) string {
	ns := params.Namespace
	config := "any provider config"
	if p != nil {
		config = p.Config
	}
	if slices.Contains(reservedNamespaces, ns) {
		return fmt.Sprintf(errFmtReserved, fieldNamespace, ns, config)
	}
	if p == nil {
		return ""
	}
	if !p.namespaceAllowed(ns, own) {
		why := describeList(p.Namespaces, fmt.Sprintf(msgFmtOwnNamespace, own))
		return fmt.Sprintf(errFmtNotAllowed, fieldNamespace, ns, p.Config, fieldAllowedNamespaces, why)
	}
	if im := ptr.Deref(params.Image, kubernetesv1alpha1.DefaultImage); !p.imageAllowed(im) {
		why := describeList(p.Images, fmt.Sprintf(msgFmtDefaultImage, kubernetesv1alpha1.DefaultImage))
		return fmt.Sprintf(errFmtNotAllowed, fieldImage, im, p.Config, fieldAllowedImages, why)
	}
	for _, check := range []func(kubernetesv1alpha1.KubernetesProxyParameters) string{p.allowService, p.allowPlacement, p.allowSize} {
		if m := check(params); m != "" {
			return m
		}
	}
	return ""
}

// refuse returns the message of a value of field that the policy list
// named list refuses, saying why.
func (p *Kubernetes) refuse(field, value, list, why string) string {
	return fmt.Sprintf(errFmtNotAllowed, field, value, p.Config, policyPrefix+list, why)
}

// allowService checks the Service type and the load balancer IP: a
// NodePort or LoadBalancer Service opens the proxy beyond the cluster, and
// a pinned address may be another team's.
func (p *Kubernetes) allowService(params kubernetesv1alpha1.KubernetesProxyParameters) string {
	st := ptr.Deref(params.ServiceType, corev1.ServiceTypeClusterIP)
	if len(p.ServiceTypes) == 0 && st != KubernetesDefaultServiceType {
		return p.refuse(fieldServiceType, string(st), "serviceTypes", fmt.Sprintf(msgFmtDefaultOne, KubernetesDefaultServiceType))
	}
	if len(p.ServiceTypes) > 0 && !slices.Contains(p.ServiceTypes, st) {
		types := make([]string, len(p.ServiceTypes))
		for i, t := range p.ServiceTypes {
			types[i] = string(t)
		}
		return p.refuse(fieldServiceType, string(st), "serviceTypes", describeList(types, ""))
	}
	ip := ptr.Deref(params.LoadBalancerIP, "")
	if ip == "" || p.loadBalancerIPAllowed(ip) {
		return ""
	}
	return p.refuse(fieldLoadBalancerIP, ip, "loadBalancerIPs", describeList(p.LoadBalancerIPs, msgKubernetesNone))
}

func (p *Kubernetes) loadBalancerIPAllowed(ip string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	for _, e := range p.LoadBalancerIPs {
		if pr, err := netip.ParsePrefix(e); err == nil && pr.Contains(a.Unmap()) {
			return true
		}
		if b, err := netip.ParseAddr(e); err == nil && b.Unmap() == a.Unmap() {
			return true
		}
	}
	return false
}

// allowPlacement checks the tolerations and node selector: by default none
// may reach the control-plane nodes.
func (p *Kubernetes) allowPlacement(params kubernetesv1alpha1.KubernetesProxyParameters) string {
	for _, t := range params.Tolerations {
		if !p.tolerationAllowed(t) {
			return p.refuse(fieldTolerations, tolerationString(t), "tolerations", describeList(tolerationStrings(p.Tolerations), msgControlPlane))
		}
	}
	keys := make([]string, 0, len(params.NodeSelector))
	for k := range params.NodeSelector {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if kv := k + "=" + params.NodeSelector[k]; !p.nodeSelectorAllowed(k, kv) {
			return p.refuse(fieldNodeSelector, kv, "nodeSelectors", describeList(p.NodeSelectors, msgControlPlane))
		}
	}
	return ""
}

func (p *Kubernetes) tolerationAllowed(t corev1.Toleration) bool {
	if len(p.Tolerations) == 0 {
		for _, taint := range controlPlaneTaints {
			if t.ToleratesTaint(logr.Discard(), &taint, true) {
				return false
			}
		}
		return true
	}
	return slices.ContainsFunc(p.Tolerations, func(a corev1.Toleration) bool {
		return a.Key == t.Key && operator(a) == operator(t) && a.Value == t.Value && a.Effect == t.Effect
	})
}

func (p *Kubernetes) nodeSelectorAllowed(key, kv string) bool {
	if len(p.NodeSelectors) == 0 {
		return !slices.ContainsFunc(controlPlaneTaints, func(t corev1.Taint) bool { return t.Key == key })
	}
	return slices.Contains(p.NodeSelectors, key) || slices.Contains(p.NodeSelectors, kv)
}

// operator is t's operator with its default.
func operator(t corev1.Toleration) corev1.TolerationOperator {
	if t.Operator == "" {
		return corev1.TolerationOpEqual
	}
	return t.Operator
}

// tolerationString writes t as kubectl's taint syntax does, with its
// operator: key=value:effect, or key:effect for Exists; "*" stands for an
// empty key or effect, which match every one.
func tolerationString(t corev1.Toleration) string {
	s, effect := t.Key, string(t.Effect)
	if s == "" {
		s = "*"
	}
	if effect == "" {
		effect = "*"
	}
	switch operator(t) {
	case corev1.TolerationOpEqual:
		s += "=" + t.Value
	case corev1.TolerationOpExists:
	default:
		s += " " + string(t.Operator) + " " + t.Value
	}
	return s + ":" + effect
}

func tolerationStrings(ts []corev1.Toleration) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = tolerationString(t)
	}
	return out
}

// allowSize checks the replicas and every request and limit against the
// ceilings: the team's proxy must not take the cluster's capacity.
func (p *Kubernetes) allowSize(params kubernetesv1alpha1.KubernetesProxyParameters) string {
	maxReplicas, why := KubernetesDefaultMaxReplicas, msgFmtDefaultMax
	if p.MaxReplicas != nil {
		maxReplicas, why = *p.MaxReplicas, msgFmtMax
	}
	if r := ptr.Deref(params.Replicas, kubernetesv1alpha1.DefaultReplicas); r > maxReplicas {
		return fmt.Sprintf(errFmtCeiling, fieldReplicas, strconv.Itoa(int(r)), p.Config, policyPrefix+"maxReplicas", fmt.Sprintf(why, strconv.Itoa(int(maxReplicas))))
	}
	if params.Resources == nil {
		return ""
	}
	ceilings, why := KubernetesDefaultMaxResources, msgFmtDefaultMax
	if len(p.MaxResources) > 0 {
		ceilings, why = p.MaxResources, msgFmtMax
	}
	for _, l := range []struct {
		field string
		list  corev1.ResourceList
	}{{fieldResources + ".requests", params.Resources.Requests}, {fieldResources + ".limits", params.Resources.Limits}} {
		names := make([]string, 0, len(l.list))
		for n := range l.list {
			names = append(names, string(n))
		}
		slices.Sort(names)
		for _, n := range names {
			q, field, list := l.list[corev1.ResourceName(n)], l.field+"."+n, policyPrefix+"maxResources."+n
			c, ok := ceilings[corev1.ResourceName(n)]
			switch {
			case !ok:
				return fmt.Sprintf(errFmtCeiling, field, q.String(), p.Config, policyPrefix+"maxResources", msgNoResource)
			case q.Cmp(c) > 0:
				return fmt.Sprintf(errFmtCeiling, field, q.String(), p.Config, list, fmt.Sprintf(why, c.String()))
			}
		}
	}
	return ""
}

func (p *Kubernetes) namespaceAllowed(ns, own string) bool {
	if len(p.Namespaces) == 0 {
		return ns == own
	}
	return slices.Contains(p.Namespaces, AnyNamespace) || slices.Contains(p.Namespaces, ns)
}

// imageAllowed matches image against the allowlist as written: a reference
// is not normalised (squid:6 is not docker.io/library/squid:6), so a list
// means exactly what it says. A prefix ending in ":" or "@" allows the tags or
// digests of one repository only: what follows may hold no "/", so
// "registry.example.com:" cannot stand for every repository on a port.
func (p *Kubernetes) imageAllowed(image string) bool {
	if len(p.Images) == 0 {
		return image == kubernetesv1alpha1.DefaultImage
	}
	for _, a := range p.Images {
		rest, ok := strings.CutPrefix(image, a)
		switch {
		case !ok:
		case rest == "", strings.HasSuffix(a, "/"):
			return true
		case (strings.HasSuffix(a, ":") || strings.HasSuffix(a, "@")) && !strings.Contains(rest, "/"):
			return true
		}
	}
	return false
}

// describe says what an allowlist allows, for a message: its entries, or
// ifEmpty.
func describeList(l []string, ifEmpty string) string {
	if len(l) == 0 {
		return ifEmpty
	}
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = strconv.Quote(s)
	}
	return msgAllow + strings.Join(q, ", ")
}
