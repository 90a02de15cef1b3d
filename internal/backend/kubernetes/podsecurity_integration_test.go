/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestIntegrationPodSecurity has the API server's PodSecurity admission judge
// the proxy pods in a namespace that enforces the "restricted" profile. It
// only warns about a Deployment, and there is no kubelet or ReplicaSet
// controller to make the pods, so the test creates (dry run) the pod the
// Deployment would make, and, to show the namespace really enforces, one
// without the hardening.
func TestIntegrationPodSecurity(t *testing.T) {
	b, c, ns := realCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	n := &corev1.Namespace{}
	step(t, "get Namespace", c.Get(ctx, client.ObjectKey{Name: ns}, n))
	n.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	n.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	step(t, "label Namespace restricted", c.Update(ctx, n))

	step(t, "Create", b.Create(ctx, desired(inNamespace(ns))))
	dep := &appsv1.Deployment{}
	step(t, "get Deployment", c.Get(ctx, client.ObjectKey{Namespace: ns, Name: testName}, dep))
	podOf := func(mod func(*corev1.PodSpec)) *corev1.Pod {
		tmpl := dep.Spec.Template.DeepCopy()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: testName + "-", Labels: tmpl.Labels, Annotations: tmpl.Annotations},
			Spec:       tmpl.Spec,
		}
		if mod != nil {
			mod(&p.Spec)
		}
		return p
	}

	if err := c.Create(ctx, podOf(nil), client.DryRunAll); err != nil {
		t.Errorf("the proxy pod must pass Pod Security restricted: %v", err)
	}
	err := c.Create(ctx, podOf(func(s *corev1.PodSpec) {
		s.SecurityContext = nil
		s.Containers[0].SecurityContext = nil
	}), client.DryRunAll)
	if !kerrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Errorf("a pod without the hardening = %v; want Forbidden by PodSecurity, or the namespace does not enforce it", err)
	}
}
