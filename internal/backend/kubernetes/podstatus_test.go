/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodProblem(t *testing.T) {
	waiting := func(name, reason, msg string, last *corev1.ContainerStateTerminated) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
				Name:                 containerName,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
				LastTerminationState: corev1.ContainerState{Terminated: last},
			}}},
		}
	}
	deleting := waiting("old", "CrashLoopBackOff", "", nil)
	deleting.DeletionTimestamp = &metav1.Time{}
	cases := map[string]struct {
		reason string
		pods   []corev1.Pod
		want   string
	}{
		"Starting": {
			reason: "A container that is still being created is not a problem.",
			pods:   []corev1.Pod{waiting("p", "ContainerCreating", "", nil)},
			want:   "",
		},
		"CrashLoop": {
			reason: "A crashing container names its last exit.",
			pods: []corev1.Pod{waiting("p", "CrashLoopBackOff", "back-off 10s", &corev1.ContainerStateTerminated{
				ExitCode: 1, Reason: "Error", Message: "FATAL: Bungled squid.conf\n",
			})},
			want: "pod p: container squid: CrashLoopBackOff (last exit code 1, Error: FATAL: Bungled squid.conf)",
		},
		"ImagePull": {
			reason: "An image that cannot be pulled says why.",
			pods:   []corev1.Pod{waiting("p", "ErrImagePull", "not found", nil)},
			want:   "pod p: container squid: ErrImagePull: not found",
		},
		"Deleting": {
			reason: "A pod on its way out is not the instance's problem.",
			pods:   []corev1.Pod{deleting},
			want:   "",
		},
		"Unschedulable": {
			reason: "A pod no node takes says so.",
			pods: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available",
			}}}}},
			want: "pod p: Unschedulable: 0/3 nodes are available",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, podProblem(pointers(tc.pods))); diff != "" {
				t.Errorf("%s\npodProblem(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func pointers(pods []corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	for i := range pods {
		out[i] = &pods[i]
	}
	return out
}
