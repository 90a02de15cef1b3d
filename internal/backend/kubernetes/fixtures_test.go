/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

var (
	_ backend.Backend[Params, Observation] = &Backend{}
	_ backend.HealthChecker                = &Backend{}
)

const (
	testNS       = "proxies"
	testName     = "egp-team-a-web-0123abcd"
	testUser     = "egressproxy"
	testPassword = "correct horse battery staple"
)

func testOwnership() backend.Ownership {
	return backend.Ownership{
		Owner:            backend.Owner{UID: "6a1f0c1e-0000-4000-8000-000000000001", Namespace: "team-a", Name: "web"},
		ProviderInstance: "default",
	}
}

type desiredMod func(*backend.Desired[Params])

// desired returns a fresh Desired; mods change the copy only.
func desired(mods ...desiredMod) backend.Desired[Params] {
	d := backend.Desired[Params]{
		Name:      testName,
		Ownership: testOwnership(),
		Proxy: commonv1alpha1.ProxyParameters{
			Port:                3128,
			AllowedClientCIDRs:  []string{"10.0.0.0/8"},
			AllowedDestinations: []string{"api.example.com"},
			AllowedConnectPorts: []int32{443},
		},
		Credentials: backend.Credentials{Username: testUser, Password: testPassword},
		Params:      Params{Namespace: testNS, Replicas: ptr.To[int32](2)},
	}
	for _, m := range mods {
		m(&d)
	}
	return d
}

func withReplicas(n int32) desiredMod {
	return func(d *backend.Desired[Params]) { d.Params.Replicas = ptr.To(n) }
}

func withDestinations(ds ...string) desiredMod {
	return func(d *backend.Desired[Params]) { d.Proxy.AllowedDestinations = ds }
}

func withPassword(pw string) desiredMod {
	return func(d *backend.Desired[Params]) { d.Credentials.Password = pw }
}

func withServiceType(t corev1.ServiceType) desiredMod {
	return func(d *backend.Desired[Params]) { d.Params.ServiceType = ptr.To(t) }
}

func withImage(i string) desiredMod {
	return func(d *backend.Desired[Params]) { d.Params.Image = ptr.To(i) }
}

// mustBuild builds the objects of d for a test.
func mustBuild(t *testing.T, d backend.Desired[Params]) objects {
	t.Helper()
	h := []byte(testUser + ":$2y$04$invalid\n")
	o, err := build(d, h)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return o
}

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serverDefaulted returns dep with what an API server and controllers add,
// none of which the backend owns.
func serverDefaulted(dep *appsv1.Deployment) *appsv1.Deployment {
	dep = dep.DeepCopy()
	dep.ResourceVersion = "42"
	dep.Generation = 3
	dep.Annotations = map[string]string{"deployment.kubernetes.io/revision": "3"}
	dep.Labels["team"] = "a"
	dep.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	dep.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	t := &dep.Spec.Template
	t.Annotations["kubectl.kubernetes.io/restartedAt"] = "2026-01-01T00:00:00Z"
	s := &t.Spec
	s.RestartPolicy = corev1.RestartPolicyAlways
	s.DNSPolicy = corev1.DNSClusterFirst
	s.SchedulerName = "default-scheduler"
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr.To[int64](30)
	}
	// A webhook adds a group; the API server defaults procMount.
	s.SecurityContext.FSGroup = ptr.To[int64](2000)
	s.Containers[0].SecurityContext.ProcMount = ptr.To(corev1.DefaultProcMount)
	s.AutomountServiceAccountToken = ptr.To(false)
	s.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	s.Containers[0].TerminationMessagePath = corev1.TerminationMessagePathDefault
	s.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageReadFile
	s.Containers = append(s.Containers, corev1.Container{Name: "injected-sidecar", Image: "mesh:1"})
	s.Volumes = append(s.Volumes, corev1.Volume{Name: "injected"})
	return dep
}

var _ backend.Watcher = &Backend{}
