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
)

func TestWiredIn(t *testing.T) {
	type want struct {
		wired map[Backend]bool
		err   bool
	}
	cases := map[string]struct {
		reason string
		src    string
		want   want
	}{
		"Nothing": {
			reason: "An empty Backends literal wires no backend.",
			src:    `package main; func backends() controllers.Backends { return controllers.Backends{} }`,
			want:   want{wired: map[Backend]bool{}},
		},
		"Literal": {
			reason: "Fields set in the literal are wired; nil ones are not.",
			src: `package main
func backends() controllers.Backends {
	return controllers.Backends{Kubernetes: kubernetesproxy.NewFactory(), KVM: nil}
}`,
			want: want{wired: map[Backend]bool{BackendKubernetes: true}},
		},
		"Assignments": {
			reason: "Fields assigned one by one are wired too.",
			src: `package main
func backends() controllers.Backends {
	b := controllers.Backends{}
	b.GCP = gcpproxy.NewFactory()
	b.KVM = kvmproxy.NewFactory()
	return b
}`,
			want: want{wired: map[Backend]bool{BackendGCP: true, BackendKVM: true}},
		},
		"NotGo": {
			reason: "A file that does not parse is an error.",
			src:    `package`,
			want:   want{err: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := wiredIn("backends.go", tc.src)
			if (err != nil) != tc.want.err {
				t.Fatalf("\n%s\nwiredIn(...): error %v, want error %v", tc.reason, err, tc.want.err)
			}
			if tc.want.err {
				return
			}
			if diff := cmp.Diff(tc.want.wired, got); diff != "" {
				t.Errorf("\n%s\nwiredIn(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
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
