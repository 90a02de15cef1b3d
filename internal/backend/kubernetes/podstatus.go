/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// maxProblem bounds the pod problem added to the Ready message: a
// termination message may be a whole log tail.
const maxProblem = 300

// stuckReasons are the waiting reasons of a container that will not start
// by itself; ContainerCreating and PodInitializing only take time.
var stuckReasons = map[string]bool{
	"CrashLoopBackOff":           true,
	"ErrImagePull":               true,
	"ImagePullBackOff":           true,
	"ErrImageNeverPull":          true,
	"InvalidImageName":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
}

// podProblem says why the first stuck pod of an instance does not run, or
// "" when none is stuck: a Deployment only reports unavailable replicas,
// and a user must otherwise find the pod and read its status to learn that
// squid crashes or the image cannot be pulled.
func podProblem(pods []*corev1.Pod) string {
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.ContainerStatuses {
			w := c.State.Waiting
			if w == nil || !stuckReasons[w.Reason] {
				continue
			}
			msg := fmt.Sprintf("pod %s: container %s: %s", p.Name, c.Name, w.Reason)
			if t := c.LastTerminationState.Terminated; t != nil {
				msg += fmt.Sprintf(" (last exit code %d, %s", t.ExitCode, t.Reason)
				if t.Message != "" {
					msg += ": " + strings.TrimSpace(t.Message)
				}
				msg += ")"
			} else if w.Message != "" {
				msg += ": " + w.Message
			}
			if len(msg) > maxProblem {
				msg = msg[:maxProblem] + "..."
			}
			return msg
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return fmt.Sprintf("pod %s: %s: %s", p.Name, c.Reason, c.Message)
			}
		}
	}
	return ""
}
