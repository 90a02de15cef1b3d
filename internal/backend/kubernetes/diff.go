/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"fmt"
	"reflect"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// Every comparison here looks only at the fields the builders set, so what
// the API server defaults (cluster IPs, node ports, pull policies, ...) or
// others add (labels, annotations, injected sidecars) never looks like drift.
// A difference is a short phrase for Observation.Diff, holding no secret.

// Kinds, as they appear in differences and errors.
const (
	kindConfigMap  = "ConfigMap"
	kindSecret     = "Secret"
	kindDeployment = "Deployment"
	kindService    = "Service"
	kindPDB        = "PodDisruptionBudget"
)

type differences []string

func (d *differences) add(format string, args ...any) {
	*d = append(*d, fmt.Sprintf(format, args...))
}

// unequal adds field when want and got differ. Objects that are the same
// to the last bit, as a steady poll finds them, are semantically equal
// too, and reflect.DeepEqual finds that faster than the semantic
// comparison, which looks up an equality function at every value (a
// whole compare: 50 → 27 µs, BenchmarkCompareUnchanged). Only what it
// finds different is compared semantically: a nil and an empty list, or
// 1000m and 1, are no difference.
//
// A steady poll finds nothing different, so nothing here allocates then:
// the caller passes pointers to what it compares (a value in an interface
// is a copy on the heap), and a field's name is only put together when it
// differs.
func (d *differences) unequal(field string, want, got any) {
	d.unequalIn(field, "", "", want, got)
}

// unequalIn is unequal for the field prefix+name+suffix, where name is
// variable (a container's, a volume's).
func (d *differences) unequalIn(prefix, name, suffix string, want, got any) {
	if !reflect.DeepEqual(want, got) && !equality.Semantic.DeepEqual(want, got) {
		d.add("%s%s%s differs", prefix, name, suffix)
	}
}

// labels adds a difference for every label of want that got lacks or
// holds another value of.
func (d *differences) labels(kind string, want, got map[string]string) {
	if hasLabels(got, want) {
		return
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v, ok := got[k]; !ok || v != want[k] {
			d.add("%s label %s is %q, want %q", kind, k, v, want[k])
		}
	}
}

// hasLabels tells whether l holds every label of want.
func hasLabels(l, want map[string]string) bool {
	for k, w := range want {
		if v, ok := l[k]; !ok || v != w {
			return false
		}
	}
	return true
}

// diffConfigMap compares the squid configuration by its checksum sum, so
// Observe need not render it (squid.Sums).
func diffConfigMap(want, got *corev1.ConfigMap, sum string) []string {
	var d differences
	d.labels(kindConfigMap, want.Labels, got.Labels)
	if configSum(got) != sum {
		d.add("%s %s differs from the rendered squid configuration", kindConfigMap, keySquidConf)
	}
	return d
}

// configSum is the checksum of cm's squid configuration: of the file, or
// the one the watch cache keeps in its place (slimConfigMap); "" when it
// has neither.
func configSum(cm *corev1.ConfigMap) string {
	if conf, ok := cm.Data[keySquidConf]; ok {
		return squid.ChecksumString(conf)
	}
	return cm.Data[keyConfigSum]
}

// diffSecret compares the htpasswd by what it accepts, not byte for byte: a
// new hash of the same password has another salt.
func diffSecret(v *squid.Verifier, want, got *corev1.Secret, user, password string) []string {
	var d differences
	d.labels(kindSecret, want.Labels, got.Labels)
	if !v.HtpasswdMatches(got.Data[keyHtpasswd], user, password) {
		d.add("%s %s does not accept the current credentials", kindSecret, keyHtpasswd)
	}
	return d
}

func diffDeployment(want, got *appsv1.Deployment) []string {
	var d differences
	d.labels(kindDeployment, want.Labels, got.Labels)
	if w, g := ptr.Deref(want.Spec.Replicas, 1), ptr.Deref(got.Spec.Replicas, 1); w != g {
		d.add("%s spec.replicas is %d, want %d", kindDeployment, g, w)
	}
	d.unequal(kindDeployment+" spec.selector", want.Spec.Selector, got.Spec.Selector)
	d.unequal(kindDeployment+" spec.strategy", &want.Spec.Strategy, &got.Spec.Strategy)
	wt, gt := &want.Spec.Template, &got.Spec.Template
	d.labels(kindDeployment+" pod template", wt.Labels, gt.Labels)
	if w, g := wt.Annotations[AnnotationConfigChecksum], gt.Annotations[AnnotationConfigChecksum]; w != g {
		d.add("%s pod template config checksum is %q, want %q", kindDeployment, g, w)
	}
	if w, g := wt.Annotations[AnnotationHtpasswdChecksum], gt.Annotations[AnnotationHtpasswdChecksum]; w != g {
		// Not the sums: they are of the bcrypt file, and need not be
		// anywhere but on the template.
		d.add("%s pod template htpasswd checksum differs from the stored htpasswd's", kindDeployment)
	}
	d = append(d, diffPodSpec(&wt.Spec, &gt.Spec)...)
	return d
}

func diffPodSpec(want, got *corev1.PodSpec) []string {
	var d differences
	const p = kindDeployment + " pod spec."
	d.unequal(p+"nodeSelector", want.NodeSelector, got.NodeSelector)
	d.unequal(p+"tolerations", &want.Tolerations, &got.Tolerations)
	d.unequal(p+"affinity", want.Affinity, got.Affinity)
	d.unequal(p+"automountServiceAccountToken", want.AutomountServiceAccountToken, got.AutomountServiceAccountToken)
	if !ptr.Equal(want.TerminationGracePeriodSeconds, got.TerminationGracePeriodSeconds) {
		d.add("%sterminationGracePeriodSeconds is %d, want %d", p,
			ptr.Deref(got.TerminationGracePeriodSeconds, 0), ptr.Deref(want.TerminationGracePeriodSeconds, 0))
	}
	if !samePodSecurity(want.SecurityContext, got.SecurityContext) {
		d.add("%ssecurityContext differs", p)
	}
	for i := range want.Volumes {
		wv := &want.Volumes[i]
		gv := volume(got.Volumes, wv.Name)
		if gv == nil {
			d.add("%svolumes has no %s", p, wv.Name)
			continue
		}
		d.unequalIn(p+"volumes ", wv.Name, "", &wv.VolumeSource, &gv.VolumeSource)
	}
	for i := range want.Containers {
		wc := &want.Containers[i]
		gc := container(got.Containers, wc.Name)
		if gc == nil {
			d.add("%scontainers has no %s", p, wc.Name)
			continue
		}
		d = append(d, diffContainer(wc, gc)...)
	}
	return d
}

func diffContainer(want, got *corev1.Container) []string {
	var d differences
	const p = kindDeployment + " container "
	n := want.Name
	if want.Image != got.Image {
		d.add("%s%s image is %q, want %q", p, n, got.Image, want.Image)
	}
	d.unequalIn(p, n, " command", &want.Command, &got.Command)
	d.unequalIn(p, n, " args", &want.Args, &got.Args)
	if !sameSecurity(want.SecurityContext, got.SecurityContext) {
		d.add("%s%s securityContext differs", p, n)
	}
	d.unequalIn(p, n, " ports", &want.Ports, &got.Ports)
	d.unequalIn(p, n, " resources", &want.Resources, &got.Resources)
	d.unequalIn(p, n, " readinessProbe", want.ReadinessProbe, got.ReadinessProbe)
	d.unequalIn(p, n, " livenessProbe", want.LivenessProbe, got.LivenessProbe)
	d.unequalIn(p, n, " lifecycle", want.Lifecycle, got.Lifecycle)
	d.unequalIn(p, n, " volumeMounts", &want.VolumeMounts, &got.VolumeMounts)
	return d
}

// ownedPodSecurity and ownedSecurity keep the fields of a security context
// that the builders set: the API server may default others (procMount), and
// admission webhooks may add some (fsGroup), which must not look like drift.
func ownedPodSecurity(sc *corev1.PodSecurityContext) corev1.PodSecurityContext {
	if sc == nil {
		return corev1.PodSecurityContext{}
	}
	return corev1.PodSecurityContext{
		RunAsNonRoot: sc.RunAsNonRoot, RunAsUser: sc.RunAsUser, RunAsGroup: sc.RunAsGroup, SeccompProfile: sc.SeccompProfile,
	}
}

func ownedSecurity(sc *corev1.SecurityContext) corev1.SecurityContext {
	if sc == nil {
		return corev1.SecurityContext{}
	}
	return corev1.SecurityContext{
		AllowPrivilegeEscalation: sc.AllowPrivilegeEscalation, ReadOnlyRootFilesystem: sc.ReadOnlyRootFilesystem, Capabilities: sc.Capabilities,
	}
}

// samePodSecurity and sameSecurity compare what ownedPodSecurity and
// ownedSecurity keep of two security contexts, field by field: the kept
// copies compared whole escaped to the heap on every Observe.
// TestSameSecurity holds them to every field the owned copies keep.
func samePodSecurity(want, got *corev1.PodSecurityContext) bool {
	w, g := ownedPodSecurity(want), ownedPodSecurity(got)
	return ptr.Equal(w.RunAsNonRoot, g.RunAsNonRoot) && ptr.Equal(w.RunAsUser, g.RunAsUser) &&
		ptr.Equal(w.RunAsGroup, g.RunAsGroup) && equality.Semantic.DeepEqual(w.SeccompProfile, g.SeccompProfile)
}

func sameSecurity(want, got *corev1.SecurityContext) bool {
	w, g := ownedSecurity(want), ownedSecurity(got)
	return ptr.Equal(w.AllowPrivilegeEscalation, g.AllowPrivilegeEscalation) &&
		ptr.Equal(w.ReadOnlyRootFilesystem, g.ReadOnlyRootFilesystem) && equality.Semantic.DeepEqual(w.Capabilities, g.Capabilities)
}

// volume and container return the element of a list named name, in place,
// or nil.
func volume(vs []corev1.Volume, name string) *corev1.Volume {
	for i := range vs {
		if vs[i].Name == name {
			return &vs[i]
		}
	}
	return nil
}

func container(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

func diffService(want, got *corev1.Service) []string {
	var d differences
	d.labels(kindService, want.Labels, got.Labels)
	if want.Spec.Type != got.Spec.Type {
		d.add("%s spec.type is %s, want %s", kindService, got.Spec.Type, want.Spec.Type)
	}
	d.unequal(kindService+" spec.selector", want.Spec.Selector, got.Spec.Selector)
	if !samePorts(want.Spec.Ports, got.Spec.Ports) {
		d.add("%s spec.ports differs", kindService)
	}
	if want.Spec.LoadBalancerIP != got.Spec.LoadBalancerIP {
		d.add("%s spec.loadBalancerIP is %q, want %q", kindService, got.Spec.LoadBalancerIP, want.Spec.LoadBalancerIP)
	}
	if want.Spec.ExternalTrafficPolicy != "" && want.Spec.ExternalTrafficPolicy != got.Spec.ExternalTrafficPolicy {
		d.add("%s spec.externalTrafficPolicy is %q, want %q", kindService, got.Spec.ExternalTrafficPolicy, want.Spec.ExternalTrafficPolicy)
	}
	return d
}

// samePorts compares the ports without the node ports the API server
// allocates.
func samePorts(want, got []corev1.ServicePort) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.Name != g.Name || w.Port != g.Port || w.Protocol != g.Protocol || w.TargetPort != g.TargetPort {
			return false
		}
	}
	return true
}

// diffPDB compares a PodDisruptionBudget; want nil means there must be none.
func diffPDB(want, got *policyv1.PodDisruptionBudget) []string {
	var d differences
	switch {
	case want == nil && got == nil:
	case want == nil:
		d.add("%s exists but the proxy has one replica", kindPDB)
	case got == nil:
		d.add("%s is missing", kindPDB)
	default:
		d.labels(kindPDB, want.Labels, got.Labels)
		d.unequal(kindPDB+" spec.minAvailable", want.Spec.MinAvailable, got.Spec.MinAvailable)
		d.unequal(kindPDB+" spec.selector", want.Spec.Selector, got.Spec.Selector)
	}
	return d
}
