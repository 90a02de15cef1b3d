/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// served returns the Deployment the builders make as an API server serves
// it once the Deployment controller has seen it: defaulted, annotated, with
// a status.
func served(t *testing.T, mod func(d *appsv1.Deployment)) (want, got *appsv1.Deployment) {
	t.Helper()
	o, err := build(desired(), []byte("h"))
	if err != nil {
		t.Fatal(err)
	}
	d := o.deployment.DeepCopy()
	d.UID, d.ResourceVersion, d.Generation = "u", "9", 2
	d.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1"}
	d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
	d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	s := &d.Spec.Template.Spec
	s.RestartPolicy, s.DNSPolicy, s.SchedulerName = corev1.RestartPolicyAlways, corev1.DNSClusterFirst, corev1.DefaultSchedulerName
	for i := range s.Containers {
		c := &s.Containers[i]
		c.TerminationMessagePath, c.TerminationMessagePolicy = corev1.TerminationMessagePathDefault, corev1.TerminationMessageReadFile
		c.ImagePullPolicy = corev1.PullIfNotPresent
	}
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "p-abc" has successfully progressed.`},
		},
	}
	if mod != nil {
		mod(d)
	}
	return o.deployment, d
}

// TestSlimDeployment shows that the cache's slim Deployments answer what
// Observe, diffDeployment, observedSame and the GC ask as the full ones do,
// and keep none of what the API server defaults.
func TestSlimDeployment(t *testing.T) {
	cases := map[string]struct {
		reason string
		mod    func(d *appsv1.Deployment)
		differ bool
	}{
		"Served": {
			reason: "A served Deployment, defaulted, is no difference.",
		},
		"Image": {
			reason: "Another image is a difference.",
			mod:    func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "other" },
			differ: true,
		},
		"Security": {
			reason: "A container allowed to escalate its privileges is a difference.",
			mod: func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
			},
			differ: true,
		},
		"Checksum": {
			reason: "Another configuration checksum on the pod template is a difference.",
			mod:    func(d *appsv1.Deployment) { d.Spec.Template.Annotations[AnnotationConfigChecksum] = "other" },
			differ: true,
		},
		"Volume": {
			reason: "A volume of another source is a difference.",
			mod: func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
			},
			differ: true,
		},
		"Handover": {
			reason: "Another grace period or pre-stop pause (an older provider's) is a difference.",
			mod: func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
				d.Spec.Template.Spec.Containers[0].Lifecycle = nil
			},
			differ: true,
		},
		"HtpasswdChecksum": {
			reason: "Another htpasswd checksum on the pod template is a difference.",
			mod:    func(d *appsv1.Deployment) { d.Spec.Template.Annotations[AnnotationHtpasswdChecksum] = "other" },
			differ: true,
		},
		"TemplateLabels": {
			reason: "Pod template labels other than the Deployment's are compared on their own.",
			mod:    func(d *appsv1.Deployment) { delete(d.Spec.Template.Labels, LabelComponent) },
			differ: true,
		},
		"Stuck": {
			reason: "A rollout past its deadline, with no replica, is reported.",
			mod: func(d *appsv1.Deployment) {
				d.Status.AvailableReplicas = 0
				d.Status.Conditions[1] = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
					Reason: reasonDeadline, Message: `ReplicaSet "p-abc" has timed out progressing.`}
			},
		},
		"Rolling": {
			reason: "A rollout the controller has not seen is reported.",
			mod:    func(d *appsv1.Deployment) { d.Status.ObservedGeneration = 1 },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want, full := served(t, tc.mod)
			out, err := slimDeployment(full.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			slim := out.(*appsv1.Deployment) //nolint:forcetypeassert // slimDeployment returns a Deployment.
			type answers struct {
				Diff      []string
				Ready     bool
				Message   string
				Creating  bool
				Checksum  string
				Labels    map[string]string
				Created   time.Time
				Available int32
			}
			now := time.Now()
			ask := func(d *appsv1.Deployment) answers {
				ready, msg := readiness(d, &corev1.Service{}, "10.0.0.1:3128")
				return answers{diffDeployment(want, d), ready, msg, creating(d, now), d.Spec.Template.Annotations[AnnotationConfigChecksum],
					d.Labels, d.CreationTimestamp.Time, d.Status.AvailableReplicas}
			}
			if diff := cmp.Diff(ask(full), ask(slim)); diff != "" {
				t.Errorf("\n%s\nslimDeployment: -full, +slim:\n%s", tc.reason, diff)
			}
			if got := len(diffDeployment(want, full)) > 0; got != tc.differ {
				t.Errorf("\n%s\ndiffDeployment: %q", tc.reason, diffDeployment(want, full))
			}
			// What the Deployment controller writes while nothing changes
			// for Observe stays the same for observedSame.
			before, _ := slimDeployment(full.DeepCopy())
			full.ResourceVersion, full.Status.Conditions[0].LastUpdateTime = "10", metav1.Now()
			after, _ := slimDeployment(full.DeepCopy())
			if !observedSame(before, after) {
				t.Errorf("\n%s\nobservedSame: a condition's time alone is a change", tc.reason)
			}
			c := slim.Spec.Template.Spec.Containers[0]
			if slim.Annotations != nil || slim.ManagedFields != nil || slim.Spec.RevisionHistoryLimit != nil ||
				slim.Spec.Template.Spec.DNSPolicy != "" || c.ImagePullPolicy != "" || c.TerminationMessagePath != "" {
				t.Errorf("\n%s\nslimDeployment kept what the API server defaults or adds: %+v", tc.reason, slim)
			}
		})
	}
}

// TestSharedLabels shows that the label strings the backend sets on every
// object are held once, and that other labels are kept as they are.
func TestSharedLabels(t *testing.T) {
	in := map[string]string{string([]byte(LabelName)): string([]byte(appName)), "team": "a"}
	got := sharedLabels(in)
	if diff := cmp.Diff(in, got); diff != "" {
		t.Errorf("sharedLabels: -in, +out:\n%s", diff)
	}
	for k, v := range got {
		if k == LabelName && (unsafe.StringData(k) != unsafe.StringData(LabelName) || unsafe.StringData(v) != unsafe.StringData(appName)) {
			t.Errorf("sharedLabels: %s=%s is a copy, not the shared string", k, v)
		}
	}
	_, d := served(t, nil)
	out, _ := slimDeployment(d)
	slim := out.(*appsv1.Deployment) //nolint:forcetypeassert // slimDeployment returns a Deployment.
	if reflect.ValueOf(slim.Labels).UnsafePointer() != reflect.ValueOf(slim.Spec.Template.Labels).UnsafePointer() {
		t.Error("slimDeployment: the pod template's labels, equal to the Deployment's, are held twice")
	}
}
