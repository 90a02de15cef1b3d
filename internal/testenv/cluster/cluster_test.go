/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
)

func TestManagedGVK(t *testing.T) {
	cases := map[string]struct {
		reason string
		b      Backend
		want   schema.GroupVersionKind
	}{
		"Known": {
			reason: "A backend's managed resource kind is the one its description names.",
			b:      Backend(registry.Backends[0].Name),
			want:   registry.Backends[0].Managed,
		},
		"Unknown": {
			reason: "An unknown backend has no managed resource kind.",
			b:      "podman",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ManagedGVK(tc.b)); diff != "" {
				t.Errorf("\n%s\nManagedGVK(%q): -want, +got:\n%s", tc.reason, tc.b, diff)
			}
		})
	}
}

func TestDoublesAreBackends(t *testing.T) {
	for b := range doubles {
		if _, ok := registry.Backends.Lookup(string(b)); !ok {
			t.Errorf("the harness has a test double of %q, which registry.Backends does not list", b)
		}
	}
}

func TestFits(t *testing.T) {
	node := func(labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	pod := func(sel map[string]string, tol ...corev1.Toleration) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: sel, Tolerations: tol}}
	}
	taint := corev1.Taint{Key: "egress", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	cases := map[string]struct {
		reason string
		pod    *corev1.Pod
		node   *corev1.Node
		want   bool
	}{
		"Plain": {
			reason: "A pod without constraints fits an untainted node.",
			pod:    pod(nil), node: node(nil), want: true,
		},
		"SelectorMatches": {
			reason: "A nodeSelector the node's labels satisfy fits.",
			pod:    pod(map[string]string{"a": "b"}), node: node(map[string]string{"a": "b", "c": "d"}), want: true,
		},
		"SelectorMisses": {
			reason: "A nodeSelector the node's labels do not satisfy does not fit.",
			pod:    pod(map[string]string{"a": "x"}), node: node(map[string]string{"a": "b"}), want: false,
		},
		"Tainted": {
			reason: "A NoSchedule taint keeps pods without a toleration away.",
			pod:    pod(nil), node: node(nil, taint), want: false,
		},
		"Tolerated": {
			reason: "A toleration of the taint lets the pod on.",
			pod:    pod(nil, corev1.Toleration{Key: "egress", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}),
			node:   node(nil, taint), want: true,
		},
		"PreferNoSchedule": {
			reason: "A PreferNoSchedule taint does not keep pods away.",
			pod:    pod(nil), node: node(nil, corev1.Taint{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}), want: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := fits(tc.pod, tc.node); got != tc.want {
				t.Errorf("\n%s\nfits(...): got %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}
