/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// The watch cache holds every object of every proxy of a target cluster for
// as long as the provider runs: at 1000 proxies those objects were most of
// the provider's live heap. Each transform here keeps of its kind what
// Observe, the comparisons of diff.go, the GC and the cache itself read.
// ensure reads an object from the API server before it updates one, so
// nothing slimmed is ever written back. Cached objects are never changed
// (readOnly), so the parts of one may share memory.

// sharedStrings are the label keys and fixed label values the backend sets
// on every object, and the key the Deployment controller adds to pods:
// decoded, every object held its own copy of each.
var sharedStrings = func() map[string]string {
	k := backend.KubernetesLabelKeys
	m := map[string]string{}
	for _, s := range []string{
		k.ManagedBy, k.OwnerUID, k.ProviderInstance, k.OwnerNamespace, k.OwnerName,
		LabelName, LabelInstance, LabelComponent, LabelManagedBy, appsv1.DefaultDeploymentUniqueLabelKey,
		appName, component, backend.ManagedByValue,
	} {
		m[s] = s
	}
	return m
}()

// sharedLabels returns l with the keys and values of sharedStrings shared.
func sharedLabels(l map[string]string) map[string]string {
	if len(l) == 0 {
		return l
	}
	out := make(map[string]string, len(l))
	for k, v := range l {
		if s, ok := sharedStrings[k]; ok {
			k = s
		}
		if s, ok := sharedStrings[v]; ok {
			v = s
		}
		out[k] = v
	}
	return out
}

// slimOwned is the transform of the kinds without one of their own: no
// managed fields (nothing reads them, and every copy of an object copied
// them), and shared label strings.
func slimOwned(in any) (any, error) {
	in, err := cache.TransformStripManagedFields()(in)
	if err != nil {
		return in, err
	}
	switch o := in.(type) {
	case *corev1.Secret:
		o.Labels = sharedLabels(o.Labels)
	case *corev1.Service:
		o.Labels = sharedLabels(o.Labels)
		o.Spec.Selector = sharedLabels(o.Spec.Selector)
	case *policyv1.PodDisruptionBudget:
		o.Labels = sharedLabels(o.Labels)
		if o.Spec.Selector != nil {
			o.Spec.Selector.MatchLabels = sharedLabels(o.Spec.Selector.MatchLabels)
		}
	}
	return in, nil
}

// slimDeployment keeps of a Deployment what Observe (readiness, creating),
// diffDeployment, observedSame and the GC read: of the pod template only
// the fields the builders set, of the status the counts and the conditions
// stuck reports. What the API server defaults (pull policies, termination
// paths, DNS and restart policies, scheduler names) and what the
// Deployment controller adds (its revision annotation, progress
// conditions) go. The template's labels are the Deployment's own, held
// once when they are equal.
func slimDeployment(in any) (any, error) {
	d, ok := in.(*appsv1.Deployment)
	if !ok {
		return in, nil
	}
	labels := sharedLabels(d.Labels)
	tmpl := labels
	if !maps.Equal(d.Labels, d.Spec.Template.Labels) {
		tmpl = sharedLabels(d.Spec.Template.Labels)
	}
	var sel *metav1.LabelSelector
	if s := d.Spec.Selector; s != nil {
		sel = &metav1.LabelSelector{MatchLabels: sharedLabels(s.MatchLabels), MatchExpressions: s.MatchExpressions}
	}
	var ann map[string]string
	for _, k := range []string{AnnotationConfigChecksum, AnnotationHtpasswdChecksum} {
		if sum, ok := d.Spec.Template.Annotations[k]; ok {
			if ann == nil {
				ann = make(map[string]string, 2)
			}
			ann[k] = sum
		}
	}
	out := &appsv1.Deployment{
		TypeMeta: d.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace: d.Namespace, Name: d.Name, UID: d.UID, ResourceVersion: d.ResourceVersion,
			Generation: d.Generation, CreationTimestamp: d.CreationTimestamp, DeletionTimestamp: d.DeletionTimestamp,
			Labels: labels,
		},
		Spec: appsv1.DeploymentSpec{
			Replicas:                d.Spec.Replicas,
			Selector:                sel,
			Strategy:                d.Spec.Strategy,
			ProgressDeadlineSeconds: d.Spec.ProgressDeadlineSeconds,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: tmpl, Annotations: ann},
				Spec:       slimPodSpec(d.Spec.Template.Spec),
			},
		},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration:  d.Status.ObservedGeneration,
			Replicas:            d.Status.Replicas,
			UpdatedReplicas:     d.Status.UpdatedReplicas,
			ReadyReplicas:       d.Status.ReadyReplicas,
			AvailableReplicas:   d.Status.AvailableReplicas,
			UnavailableReplicas: d.Status.UnavailableReplicas,
		},
	}
	for _, c := range d.Status.Conditions {
		if stuckCondition(c) {
			out.Status.Conditions = append(out.Status.Conditions, c)
		}
	}
	return out, nil
}

// slimPodSpec keeps the fields diffPodSpec and diffContainer compare.
func slimPodSpec(s corev1.PodSpec) corev1.PodSpec {
	out := corev1.PodSpec{
		NodeSelector:                  s.NodeSelector,
		Tolerations:                   s.Tolerations,
		Affinity:                      s.Affinity,
		AutomountServiceAccountToken:  s.AutomountServiceAccountToken,
		TerminationGracePeriodSeconds: s.TerminationGracePeriodSeconds,
	}
	if sc := s.SecurityContext; sc != nil {
		owned := ownedPodSecurity(sc)
		out.SecurityContext = &owned
	}
	for _, v := range s.Volumes {
		out.Volumes = append(out.Volumes, corev1.Volume{Name: v.Name, VolumeSource: v.VolumeSource})
	}
	for _, c := range s.Containers {
		sc := c.SecurityContext
		if sc != nil {
			owned := ownedSecurity(sc)
			sc = &owned
		}
		out.Containers = append(out.Containers, corev1.Container{
			Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args, SecurityContext: sc,
			Ports: c.Ports, Resources: c.Resources, ReadinessProbe: c.ReadinessProbe, LivenessProbe: c.LivenessProbe,
			Lifecycle: c.Lifecycle, VolumeMounts: c.VolumeMounts,
		})
	}
	return out
}

// slimPod keeps of a Pod only what Observe reads (podReady, podProblem)
// and what the cache selects and tracks it by: at a few thousand pods their
// specs, annotations and managed fields would be most of the cache. Of its
// conditions only the two those read (each pod has five or more, with
// reasons, messages and times), of its containers only those stuck.
func slimPod(in any) (any, error) {
	p, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil
	}
	out := &corev1.Pod{
		TypeMeta:   p.TypeMeta,
		ObjectMeta: slimMeta(p.ObjectMeta),
		Spec:       corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status:     corev1.PodStatus{Phase: p.Status.Phase},
	}
	for _, c := range p.Status.Conditions {
		switch {
		case c.Type == corev1.PodReady:
			out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status})
		case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable:
			out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil && stuckReasons[w.Reason] {
			out.Status.ContainerStatuses = append(out.Status.ContainerStatuses, corev1.ContainerStatus{
				Name:                 c.Name,
				State:                corev1.ContainerState{Waiting: w},
				LastTerminationState: corev1.ContainerState{Terminated: c.LastTerminationState.Terminated},
			})
		}
	}
	return out, nil
}

// keyConfigSum holds, in a ConfigMap of the watch cache, the checksum of
// its squid.conf in place of the file. No ConfigMap of an API server has
// it: a data key cannot hold a "/".
const keyConfigSum = "sha256/" + keySquidConf

// slimConfigMap keeps of a ConfigMap's data only the checksum of its squid
// configuration, which is all Observe compares (configSum): the files were
// most of what the cache held of ConfigMaps. ensure reads a ConfigMap from
// the API server before it updates one.
func slimConfigMap(in any) (any, error) {
	in, err := cache.TransformStripManagedFields()(in)
	cm, ok := in.(*corev1.ConfigMap)
	if err != nil || !ok {
		return in, err
	}
	cm.Labels = sharedLabels(cm.Labels)
	if conf, ok := cm.Data[keySquidConf]; ok {
		cm.Data = map[string]string{keyConfigSum: squid.ChecksumString(conf)}
	} else {
		cm.Data = nil
	}
	cm.BinaryData = nil
	return cm, nil
}

// slimNode keeps of a Node only its addresses (egressIPs): every node of
// the cluster is cached, and a node's images and status are large.
func slimNode(in any) (any, error) {
	n, ok := in.(*corev1.Node)
	if !ok {
		return in, nil
	}
	return &corev1.Node{
		TypeMeta:   n.TypeMeta,
		ObjectMeta: slimMeta(n.ObjectMeta),
		Status:     corev1.NodeStatus{Addresses: n.Status.Addresses},
	}, nil
}

// slimMeta keeps what the cache indexes and selects by (namespace, name,
// labels), what tracks versions and deletion, and nothing else.
func slimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace:         m.Namespace,
		Name:              m.Name,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		Labels:            sharedLabels(m.Labels),
		DeletionTimestamp: m.DeletionTimestamp,
	}
}
