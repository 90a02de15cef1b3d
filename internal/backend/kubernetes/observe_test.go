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

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// observed is the part of an Observation a case checks.
type observed struct {
	Class     backend.Class
	UpToDate  bool
	Diff      string // a phrase Diff must contain
	Ready     bool
	Message   string
	Endpoint  string
	EgressIPs []string
	State     commonv1alpha1.InstanceState
	Available int32
	Creating  bool
}

func TestObserve(t *testing.T) {
	endpoint := testName + ".proxies.svc:3128"
	lb := desired(withServiceType(corev1.ServiceTypeLoadBalancer))
	cases := map[string]struct {
		reason  string
		create  *backend.Desired[Params]
		mutate  []mutation
		observe backend.Desired[Params]
		want    observed
	}{
		"Missing": {
			reason:  "Without a Deployment the instance does not exist.",
			observe: desired(),
			want:    observed{Class: backend.ClassNotFound},
		},
		"OtherOwner": {
			reason:  "A Deployment of another resource, and no part of ours, is not this instance: Create then reports the clash.",
			create:  ptr.To(desired()),
			mutate:  []mutation{foreign(&appsv1.Deployment{}), remove(&corev1.ConfigMap{}), remove(&corev1.Secret{}), remove(&corev1.Service{}), remove(&policyv1.PodDisruptionBudget{})},
			observe: desired(),
			want:    observed{Class: backend.ClassNotFound},
		},
		"OtherOwnerWithOurParts": {
			reason:  "Parts of ours beside another resource's Deployment (Create refused at the Deployment) keep the instance: Update reports the clash, Delete removes ours.",
			create:  ptr.To(desired()),
			mutate:  []mutation{foreign(&appsv1.Deployment{}), remove(&corev1.Service{}), remove(&policyv1.PodDisruptionBudget{})},
			observe: desired(),
			want: observed{Diff: "Deployment proxies/" + testName + " is not managed by this resource",
				Message: "Deployment proxies/" + testName + " is not managed by this resource; ConfigMap and Secret exist", State: commonv1alpha1.StatePending},
		},
		"HalfMade": {
			reason:  "Create stopped after the ConfigMap and the Secret: not NotFound, or the resource would be deleted without Delete and both (the htpasswd) leak.",
			create:  ptr.To(desired()),
			mutate:  []mutation{remove(&appsv1.Deployment{}), remove(&corev1.Service{}), remove(&policyv1.PodDisruptionBudget{})},
			observe: desired(),
			want: observed{Diff: "Deployment proxies/" + testName + " is missing",
				Message: "Deployment proxies/" + testName + " is missing; ConfigMap and Secret exist", State: commonv1alpha1.StatePending},
		},
		"HalfDeleted": {
			reason:  "A Service that outlives the Deployment (a load balancer finalizer) is still a part: the instance is not gone.",
			create:  ptr.To(desired()),
			mutate:  []mutation{remove(&appsv1.Deployment{}), remove(&corev1.ConfigMap{}), remove(&corev1.Secret{}), remove(&policyv1.PodDisruptionBudget{})},
			observe: desired(),
			want: observed{Diff: "Deployment proxies/" + testName + " is missing",
				Message: "Deployment proxies/" + testName + " is missing; Service exists", State: commonv1alpha1.StatePending},
		},
		"OnlyForeignParts": {
			reason:  "Parts of another resource are none of ours: NotFound.",
			create:  ptr.To(desired()),
			mutate:  []mutation{remove(&appsv1.Deployment{}), foreign(&corev1.ConfigMap{}), foreign(&corev1.Secret{}), remove(&corev1.Service{}), remove(&policyv1.PodDisruptionBudget{})},
			observe: desired(),
			want:    observed{Class: backend.ClassNotFound},
		},
		"Created": {
			reason:  "A new instance is up to date but not ready until its pods are; moments after creation it is still Creating.",
			create:  ptr.To(desired()),
			mutate:  []mutation{createdAgo(time.Second)},
			observe: desired(),
			want: observed{UpToDate: true, Message: "0 of 2 replicas available",
				Endpoint: endpoint, State: commonv1alpha1.StatePending, Creating: true},
		},
		"NotComingUp": {
			reason:  "A Deployment with no replica past its progress deadline is no longer Creating: its resource shows the count.",
			create:  ptr.To(desired()),
			mutate:  []mutation{createdAgo(defaultProgressDeadline + time.Second)},
			observe: desired(),
			want: observed{UpToDate: true, Message: "0 of 2 replicas available",
				Endpoint: endpoint, State: commonv1alpha1.StatePending},
		},
		"SlowButProgressing": {
			reason:  "A proxy slower than a few minutes to come up, with nothing wrong, is still Creating: ending that early cost a status write each that told the user nothing.",
			create:  ptr.To(desired()),
			mutate:  []mutation{createdAgo(4 * time.Minute)},
			observe: desired(),
			want: observed{UpToDate: true, Message: "0 of 2 replicas available",
				Endpoint: endpoint, State: commonv1alpha1.StatePending, Creating: true},
		},
		"PastOwnDeadline": {
			reason: "The Deployment's own progress deadline bounds Creating, not the default one.",
			create: ptr.To(desired()),
			mutate: []mutation{createdAgo(61 * time.Second), edit(&appsv1.Deployment{}, func(d *appsv1.Deployment) {
				d.Spec.ProgressDeadlineSeconds = ptr.To[int32](60)
			})},
			observe: desired(),
			want: observed{UpToDate: true, Message: "0 of 2 replicas available",
				Endpoint: endpoint, State: commonv1alpha1.StatePending},
		},
		"StuckWithoutReplicas": {
			reason: "With no replica available, the message is the count and why the rollout is stuck, also moments after creation.",
			create: ptr.To(desired()),
			mutate: []mutation{createdAgo(time.Second), editStatus(&appsv1.Deployment{}, func(d *appsv1.Deployment) {
				d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Message: "pods is forbidden: exceeded quota"}}
			})},
			observe: desired(),
			want: observed{UpToDate: true, Message: "0 of 2 replicas available; ReplicaFailure: pods is forbidden: exceeded quota",
				Endpoint: endpoint, State: commonv1alpha1.StatePending},
		},
		"Available": {
			reason:  "A done rollout with available replicas is ready; egress IPs are the external IPs of nodes with ready pods.",
			create:  ptr.To(desired()),
			mutate:  []mutation{available(2), node("a", "127.0.0.2"), node("b", "127.0.0.1"), node("c", "127.0.0.3"), runningPod("p1", "a", true), runningPod("p2", "b", true), runningPod("p3", "b", true), runningPod("p4", "c", false)},
			observe: desired(),
			want: observed{UpToDate: true, Ready: true, Message: "2 of 2 replicas available", Endpoint: endpoint,
				EgressIPs: []string{"127.0.0.1", "127.0.0.2"}, State: commonv1alpha1.StateRunning, Available: 2},
		},
		"RollingOut": {
			reason: "A change rolling out keeps the proxy ready: its old pods serve until new ones are ready (maxUnavailable 0).",
			create: ptr.To(desired()),
			mutate: []mutation{editStatus(&appsv1.Deployment{}, func(d *appsv1.Deployment) {
				d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 4, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
			})},
			observe: desired(),
			want: observed{UpToDate: true, Ready: true, Message: "rolling out: 2 of 2 replicas updated, 2 available", Endpoint: endpoint,
				State: commonv1alpha1.StateRunning, Available: 2},
		},
		"NotYetSeen": {
			reason: "A change the Deployment controller has not seen yet keeps the proxy ready too.",
			create: ptr.To(desired()),
			mutate: []mutation{editStatus(&appsv1.Deployment{}, func(d *appsv1.Deployment) {
				d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation - 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
			})},
			observe: desired(),
			want: observed{UpToDate: true, Ready: true, Message: msgGeneration, Endpoint: endpoint,
				State: commonv1alpha1.StateRunning, Available: 2},
		},
		"RolloutStuck": {
			reason: "A change whose new pods never become ready (past the progress deadline) is not ready, or a broken change would never show.",
			create: ptr.To(desired()),
			mutate: []mutation{editStatus(&appsv1.Deployment{}, func(d *appsv1.Deployment) {
				d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 4, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
					Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: reasonDeadline, Message: "timed out"}}}
			})},
			observe: desired(),
			want: observed{UpToDate: true, Message: "rolling out: 2 of 2 replicas updated, 2 available; Progressing: timed out", Endpoint: endpoint,
				State: commonv1alpha1.StateRunning, Available: 2},
		},
		"LoadBalancerPending": {
			reason:  "A LoadBalancer without an address is not ready.",
			create:  &lb,
			mutate:  []mutation{available(2)},
			observe: lb,
			want: observed{UpToDate: true, Message: "waiting for the load balancer of Service " + testName + " to get an address",
				State: commonv1alpha1.StateRunning, Available: 2},
		},
		"LoadBalancerReady": {
			reason: "The endpoint of a LoadBalancer is its ingress address.",
			create: &lb,
			mutate: []mutation{available(1), editStatus(&corev1.Service{}, func(s *corev1.Service) {
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "127.0.0.10"}}
			})},
			observe: lb,
			want: observed{UpToDate: true, Ready: true, Message: "1 of 2 replicas available", Endpoint: "127.0.0.10:3128",
				State: commonv1alpha1.StateRunning, Available: 1},
		},
		"ServiceDeleted": {
			reason:  "A deleted Service is drift, and leaves clients without an endpoint.",
			create:  ptr.To(desired()),
			mutate:  []mutation{available(2), remove(&corev1.Service{})},
			observe: desired(),
			want: observed{Diff: "Service is missing", Message: "Service " + testName + " is missing",
				State: commonv1alpha1.StateRunning, Available: 2},
		},
		"ServiceOfAnotherOwner": {
			reason:  "Another resource's Service is drift, and its address is never reported.",
			create:  ptr.To(desired()),
			mutate:  []mutation{available(2), foreign(&corev1.Service{})},
			observe: desired(),
			want: observed{Diff: "Service proxies/" + testName + " is not managed by this resource",
				Message: "Service " + testName + " is missing", State: commonv1alpha1.StateRunning, Available: 2},
		},
		"ReplicasEdited": {
			reason:  "An edited replica count is drift.",
			create:  ptr.To(desired()),
			mutate:  []mutation{edit(&appsv1.Deployment{}, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](1) })},
			observe: desired(),
			want: observed{Diff: "spec.replicas is 1, want 2", Message: "0 of 1 replicas available",
				Endpoint: endpoint, State: commonv1alpha1.StatePending},
		},
		"PasswordRotated": {
			reason:  "A new password the htpasswd does not accept is drift.",
			create:  ptr.To(desired()),
			observe: desired(withPassword("rotated")),
			want: observed{Diff: "Secret htpasswd does not accept the current credentials",
				Message: "0 of 2 replicas available", Endpoint: endpoint, State: commonv1alpha1.StatePending},
		},
		"ScaledToOne": {
			reason:  "A PodDisruptionBudget left over after scaling to one replica is drift.",
			create:  ptr.To(desired()),
			observe: desired(withReplicas(1)),
			want: observed{Diff: "PodDisruptionBudget exists but the proxy has one replica",
				Message: "0 of 2 replicas available", Endpoint: endpoint, State: commonv1alpha1.StatePending},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fakeCluster(t)
			if tc.create != nil {
				c = created(t, *tc.create)
			}
			for _, m := range tc.mutate {
				m(t, c)
			}
			o, err := New(c).Observe(t.Context(), tc.observe)
			got := observed{
				Class: backend.ClassOf(err), UpToDate: o.UpToDate, Diff: tc.want.Diff, Ready: o.Ready, Message: o.Message,
				Endpoint: o.Endpoint, EgressIPs: o.EgressIPs, State: o.State, Available: o.Extra.AvailableReplicas,
				Creating: o.Creating,
			}
			if !strings.Contains(o.Diff, tc.want.Diff) {
				got.Diff = o.Diff
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nObserve(...): -want, +got:\n%s\nerror: %v", tc.reason, diff, err)
			}
		})
	}
}

func TestObserveReadsBack(t *testing.T) {
	d := desired()
	c := created(t, d)
	o, err := New(c, WithClusterID("127.0.0.1:6443")).Observe(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	want := mustBuild(t, d).checksum
	if o.ConfigChecksum != want {
		t.Errorf("ConfigChecksum = %q, want %q", o.ConfigChecksum, want)
	}
	if diff := cmp.Diff(testOwnership(), o.Ownership); diff != "" {
		t.Errorf("Ownership: -want, +got:\n%s", diff)
	}
	if id := "kubernetes://127.0.0.1:6443/proxies/" + testName; o.ID != id {
		t.Errorf("ID = %q, want %q", o.ID, id)
	}
	if _, err := backend.ParseID(o.ID, IDScheme, "cluster", "namespace", "name"); err != nil {
		t.Errorf("ParseID(%q): %v", o.ID, err)
	}
}

func TestObserveErrors(t *testing.T) {
	forbidden := func(gr schema.GroupResource) error {
		return kerrors.NewForbidden(gr, "x", kerrors.NewUnauthorized("cannot get"))
	}
	cases := map[string]struct {
		reason string
		funcs  interceptor.Funcs
		want   backend.Class
		msg    string
	}{
		"DeploymentForbidden": {
			reason: "Missing RBAC to read Deployments is Permanent and says so.",
			funcs: interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return forbidden(schema.GroupResource{Group: "apps", Resource: "deployments"})
			}},
			want: backend.ClassPermanent,
			msg:  "may not get deployments.apps in namespace proxies",
		},
		"Unreachable": {
			reason: "An unreachable cluster is Transient.",
			funcs: interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return kerrors.NewTimeoutError("no answer", 1)
			}},
			want: backend.ClassTransient,
			msg:  "cannot get Deployment proxies/" + testName,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(failing(t, tc.funcs)).Observe(t.Context(), desired())
			if diff := cmp.Diff(tc.want, backend.ClassOf(err)); diff != "" {
				t.Errorf("%s\nObserve(...) class: -want, +got:\n%s", tc.reason, diff)
			}
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s\nObserve(...) = %v, want a message containing %q", tc.reason, err, tc.msg)
			}
		})
	}
}
