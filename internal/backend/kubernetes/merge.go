/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// The merges write only the fields the builders set into the live object and
// keep everything else: what the API server allocated (cluster IP, node
// ports), and what others added (a kubectl rollout restart annotation, an
// injected sidecar), whose loss would roll the pods or break the Service.

func mergeDeployment(want, got *appsv1.Deployment) {
	mergeLabels(want, got)
	got.Spec.Replicas = want.Spec.Replicas
	// The selector is immutable: a different one fails as Invalid, which
	// names the problem better than anything written here.
	got.Spec.Selector = want.Spec.Selector
	got.Spec.Strategy = want.Spec.Strategy

	wt, gt := &want.Spec.Template, &got.Spec.Template
	if gt.Labels == nil {
		gt.Labels = map[string]string{}
	}
	maps.Copy(gt.Labels, wt.Labels)
	if gt.Annotations == nil {
		gt.Annotations = map[string]string{}
	}
	maps.Copy(gt.Annotations, wt.Annotations)

	ws, gs := &wt.Spec, &gt.Spec
	gs.NodeSelector = ws.NodeSelector
	gs.Tolerations = ws.Tolerations
	gs.Affinity = ws.Affinity
	gs.AutomountServiceAccountToken = ws.AutomountServiceAccountToken
	gs.TerminationGracePeriodSeconds = ws.TerminationGracePeriodSeconds
	gs.SecurityContext = mergePodSecurity(ws.SecurityContext, gs.SecurityContext)
	for _, v := range ws.Volumes {
		gs.Volumes = replaceVolume(gs.Volumes, v)
	}
	for _, c := range ws.Containers {
		gs.Containers = replaceContainer(gs.Containers, c)
	}
}

// mergePodSecurity writes the fields of want that the builders own into a
// copy of got, keeping what others set (an fsGroup a webhook adds, say).
func mergePodSecurity(want, got *corev1.PodSecurityContext) *corev1.PodSecurityContext {
	if got == nil {
		return want
	}
	out := got.DeepCopy()
	out.RunAsNonRoot, out.RunAsUser, out.RunAsGroup = want.RunAsNonRoot, want.RunAsUser, want.RunAsGroup
	out.SeccompProfile = want.SeccompProfile
	return out
}

func replaceVolume(vs []corev1.Volume, v corev1.Volume) []corev1.Volume {
	for i := range vs {
		if vs[i].Name == v.Name {
			vs[i] = v
			return vs
		}
	}
	return append(vs, v)
}

// replaceContainer replaces the container of c's name, or appends c (the
// traffic container, to a Deployment of an older provider). Fields the API
// server defaulted in the old one are defaulted again to the same values,
// so the pod template hash only changes when an owned field does.
func replaceContainer(cs []corev1.Container, c corev1.Container) []corev1.Container {
	for i := range cs {
		if cs[i].Name == c.Name {
			cs[i] = c
			return cs
		}
	}
	return append(cs, c)
}

func mergeService(want, got *corev1.Service) {
	mergeLabels(want, got)
	ws, gs := &want.Spec, &got.Spec
	gs.Type = ws.Type
	gs.Selector = ws.Selector
	gs.LoadBalancerIP = ws.LoadBalancerIP
	gs.ExternalTrafficPolicy = ws.ExternalTrafficPolicy

	ports := make([]corev1.ServicePort, len(ws.Ports))
	copy(ports, ws.Ports)
	if ws.Type != corev1.ServiceTypeClusterIP {
		// Keep the allocated node port: clients and firewalls may use it.
		for i := range ports {
			for _, old := range gs.Ports {
				if old.Name == ports[i].Name {
					ports[i].NodePort = old.NodePort
				}
			}
		}
	}
	gs.Ports = ports
	if ws.Type != corev1.ServiceTypeLoadBalancer {
		// Fields only a LoadBalancer may have: the API server refuses the
		// type change while they are set.
		gs.AllocateLoadBalancerNodePorts = nil
		gs.HealthCheckNodePort = 0
		gs.LoadBalancerClass = nil
	}
}
