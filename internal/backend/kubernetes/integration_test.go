/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
	kubeenv "github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// The integration tests run the backend against a real kube-apiserver, which
// defaults and validates every object as a cluster does. There is no
// kube-controller-manager or kubelet: the tests play their part by writing
// the Deployment, pod and node status a cluster would.

func TestMain(m *testing.M) { os.Exit(kubeenv.Main(m)) }

// realCluster returns a backend on a shared kube-apiserver, the client the
// test plays the cluster with, and a fresh namespace. The backend reads from
// the API server: these tests change the cluster and observe at once, which
// a watch cache would show a moment later (watch_integration_test.go tests
// the cache).
func realCluster(t *testing.T) (*Backend, client.Client, string) {
	t.Helper()
	env := kubeenv.Shared(t)
	b, err := NewForConfig(env.Config, WithoutWatchCache())
	if err != nil {
		t.Fatal(err)
	}
	return b, env.Client, env.Namespace(t, "proxy")
}

func inNamespace(ns string) desiredMod {
	return func(d *backend.Desired[Params]) { d.Params.Namespace = ns }
}

// step fails the test when an operation fails.
func step(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// observe returns the observation of d, failing on an error.
func observe(ctx context.Context, t *testing.T, b *Backend, d backend.Desired[Params]) backend.Observation[Observation] {
	t.Helper()
	o, err := b.Observe(ctx, d)
	step(t, "Observe", err)
	return o
}

// markAvailable writes the Deployment status the Deployment controller
// would write once the rollout of the current generation is done.
func markAvailable(ctx context.Context, t *testing.T, c client.Client, ns string, n int32) {
	t.Helper()
	dep := &appsv1.Deployment{}
	step(t, "get Deployment", c.Get(ctx, client.ObjectKey{Namespace: ns, Name: testName}, dep))
	r := ptr.Deref(dep.Spec.Replicas, 1)
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: r, UpdatedReplicas: r, ReadyReplicas: n, AvailableReplicas: n}
	step(t, "update Deployment status", c.Status().Update(ctx, dep))
}

// readyPodOn creates a running, ready proxy pod on a new node with an
// external address, as a kubelet would report them.
func readyPodOn(ctx context.Context, t *testing.T, c client.Client, ns, nodeName, ip string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	step(t, "create Node", c.Create(ctx, n))
	t.Cleanup(func() { _ = c.Delete(context.Background(), n) })
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: ip}, {Type: corev1.NodeInternalIP, Address: "127.0.1.1"}}
	step(t, "update Node status", c.Status().Update(ctx, n))
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: testName + "-", Labels: selector(testName)},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: containerName, Image: DefaultImage}}},
	}
	step(t, "create Pod", c.Create(ctx, p))
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	step(t, "update Pod status", c.Status().Update(ctx, p))
}

func TestIntegrationLifecycle(t *testing.T) {
	b, c, ns := realCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	d := desired(inNamespace(ns))
	k := client.ObjectKey{Namespace: ns, Name: testName}

	if _, err := b.Observe(ctx, d); !backend.IsNotFound(err) {
		t.Fatalf("Observe before Create = %v, want NotFound", err)
	}
	step(t, "Create", b.Create(ctx, d))
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}, &appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}} {
		step(t, "get created object", c.Get(ctx, k, obj))
		if !backend.OwnedBy(backend.KubernetesLabelKeys, obj.GetLabels(), d.Ownership) || obj.GetLabels()[LabelName] != appName {
			t.Errorf("%T lacks the ownership or app labels: %v", obj, obj.GetLabels())
		}
	}

	// What the API server defaulted must not look like drift.
	o := observe(ctx, t, b, d)
	if !o.UpToDate || o.Ready {
		t.Fatalf("after Create: UpToDate %v (diff %q), Ready %v; want up to date, not ready", o.UpToDate, o.Diff, o.Ready)
	}
	rv := resourceVersions(ctx, t, c, k)
	step(t, "second Create", b.Create(ctx, d))
	if got := resourceVersions(ctx, t, c, k); got != rv {
		t.Errorf("a second Create changed objects: %s -> %s", rv, got)
	}

	markAvailable(ctx, t, c, ns, 2)
	readyPodOn(ctx, t, c, ns, ns+"-a", "127.0.0.2")
	readyPodOn(ctx, t, c, ns, ns+"-b", "127.0.0.1")
	o = observe(ctx, t, b, d)
	wantEndpoint := testName + "." + ns + ".svc:3128"
	if !o.Ready || o.Endpoint != wantEndpoint || o.Message != "2 of 2 replicas available" || strings.Join(o.EgressIPs, ",") != "127.0.0.1,127.0.0.2" {
		t.Errorf("after rollout: Ready %v, Endpoint %q, Message %q, EgressIPs %v; want ready at %s with 2 of 2 and two egress IPs",
			o.Ready, o.Endpoint, o.Message, o.EgressIPs, wantEndpoint)
	}
	if !strings.HasPrefix(o.ID, "kubernetes://127.0.0.1:") || !strings.HasSuffix(o.ID, "/"+ns+"/"+testName) || o.CreatedAt.IsZero() {
		t.Errorf("ID %q, CreatedAt %v: want kubernetes://<apiserver>/%s/%s and a creation time", o.ID, o.CreatedAt, ns, testName)
	}

	t.Run("AllowlistChange", func(t *testing.T) { allowlistChange(ctx, t, b, c, d) })
	t.Run("Drift", func(t *testing.T) { drift(ctx, t, b, c, d) })
	t.Run("PasswordRotation", func(t *testing.T) { passwordRotation(ctx, t, b, c, d) })
	t.Run("ServiceTypes", func(t *testing.T) { serviceTypes(ctx, t, b, c, d) })
	t.Run("ScaleToOne", func(t *testing.T) { scaleToOne(ctx, t, b, c, d) })
	t.Run("ListAndDelete", func(t *testing.T) { listAndDelete(ctx, t, b, c, d) })
}

// resourceVersions joins the resource versions of the instance's objects.
func resourceVersions(ctx context.Context, t *testing.T, c client.Client, k client.ObjectKey) string {
	t.Helper()
	var out []string
	for _, kind := range deleteOrder() {
		obj := kind.object()
		if err := c.Get(ctx, k, obj); err != nil && !kerrors.IsNotFound(err) {
			t.Fatal(err)
		}
		out = append(out, obj.GetResourceVersion())
	}
	return strings.Join(out, ",")
}

func deployment(ctx context.Context, t *testing.T, c client.Client, d backend.Desired[Params]) *appsv1.Deployment {
	t.Helper()
	dep := &appsv1.Deployment{}
	step(t, "get Deployment", c.Get(ctx, client.ObjectKey{Namespace: d.Params.Namespace, Name: d.Name}, dep))
	return dep
}

// converge runs Update and checks that Observe then finds nothing to do.
func converge(ctx context.Context, t *testing.T, b *Backend, d backend.Desired[Params]) backend.Observation[Observation] {
	t.Helper()
	step(t, "Update", b.Update(ctx, d))
	o := observe(ctx, t, b, d)
	if !o.UpToDate {
		t.Fatalf("after Update: not up to date: %s", o.Diff)
	}
	return o
}

func allowlistChange(ctx context.Context, t *testing.T, b *Backend, c client.Client, d backend.Desired[Params]) {
	before := deployment(ctx, t, c, d).Spec.Template.Annotations[AnnotationConfigChecksum]
	d2 := d
	d2.Proxy.AllowedDestinations = []string{"api.example.com", ".example.org"}
	if o := observe(ctx, t, b, d2); o.UpToDate {
		t.Fatalf("a new allowlist must make the instance out of date")
	}
	o := converge(ctx, t, b, d2)
	after := deployment(ctx, t, c, d).Spec.Template.Annotations[AnnotationConfigChecksum]
	if after == before || o.ConfigChecksum != after {
		t.Errorf("checksum before %q, after %q, observed %q: want a new checksum in the pod template", before, after, o.ConfigChecksum)
	}
	step(t, "restore allowlist", b.Update(ctx, d))
	markAvailable(ctx, t, c, d.Params.Namespace, 2)
}

func drift(ctx context.Context, t *testing.T, b *Backend, c client.Client, d backend.Desired[Params]) {
	step(t, "delete Service", c.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: d.Params.Namespace, Name: d.Name}}))
	dep := deployment(ctx, t, c, d)
	dep.Spec.Replicas = ptr.To[int32](5)
	dep.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	step(t, "edit Deployment", c.Update(ctx, dep))
	o := observe(ctx, t, b, d)
	if o.UpToDate || !strings.Contains(o.Diff, "Service is missing") || !strings.Contains(o.Diff, "spec.replicas is 5") {
		t.Fatalf("after drift: UpToDate %v, diff %q; want the missing Service and the replicas", o.UpToDate, o.Diff)
	}
	converge(ctx, t, b, d)
	if r := *deployment(ctx, t, c, d).Spec.Replicas; r != 2 {
		t.Errorf("replicas after Update = %d, want 2", r)
	}
	markAvailable(ctx, t, c, d.Params.Namespace, 2)
}

func passwordRotation(ctx context.Context, t *testing.T, b *Backend, c client.Client, d backend.Desired[Params]) {
	gen := deployment(ctx, t, c, d).Generation
	d2 := d
	d2.Credentials.Password = "rotated password"
	if o := observe(ctx, t, b, d2); o.UpToDate || !strings.Contains(o.Diff, "htpasswd") {
		t.Fatalf("a rotated password must make the instance out of date, diff %q", o.Diff)
	}
	converge(ctx, t, b, d2)
	s := &corev1.Secret{}
	step(t, "get Secret", c.Get(ctx, client.ObjectKey{Namespace: d.Params.Namespace, Name: d.Name}, s))
	if !squid.HtpasswdMatches(s.Data[keyHtpasswd], testUser, "rotated password") {
		t.Errorf("the htpasswd does not accept the rotated password")
	}
	// The pods roll, so the rotation is in force once new pods are ready
	// rather than after the kubelet's Secret sync.
	if g := deployment(ctx, t, c, d).Generation; g == gen {
		t.Errorf("a password rotation left the Deployment at generation %d: the pods must roll", g)
	}
	step(t, "restore password", b.Update(ctx, d))
}

func serviceTypes(ctx context.Context, t *testing.T, b *Backend, c client.Client, d backend.Desired[Params]) {
	for _, st := range []corev1.ServiceType{corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort, corev1.ServiceTypeClusterIP} {
		d2 := d
		d2.Params.ServiceType = ptr.To(st)
		o := converge(ctx, t, b, d2)
		if st != corev1.ServiceTypeLoadBalancer {
			continue
		}
		if o.Ready || o.Endpoint != "" {
			t.Errorf("a LoadBalancer without an address: Ready %v, Endpoint %q; want not ready, no endpoint", o.Ready, o.Endpoint)
		}
		svc := &corev1.Service{}
		step(t, "get Service", c.Get(ctx, client.ObjectKey{Namespace: d.Params.Namespace, Name: d.Name}, svc))
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "127.0.0.10", IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
		step(t, "update Service status", c.Status().Update(ctx, svc))
		if o := observe(ctx, t, b, d2); !o.Ready || o.Endpoint != "127.0.0.10:3128" {
			t.Errorf("a LoadBalancer with an address: Ready %v, Endpoint %q; want ready at 127.0.0.10:3128 (%s)", o.Ready, o.Endpoint, o.Message)
		}
	}
}

func scaleToOne(ctx context.Context, t *testing.T, b *Backend, c client.Client, d backend.Desired[Params]) {
	d2 := d
	d2.Params.Replicas = ptr.To[int32](1)
	converge(ctx, t, b, d2)
	err := c.Get(ctx, client.ObjectKey{Namespace: d.Params.Namespace, Name: d.Name}, &policyv1.PodDisruptionBudget{})
	if !kerrors.IsNotFound(err) {
		t.Errorf("the PodDisruptionBudget must go with one replica, get = %v", err)
	}
	converge(ctx, t, b, d)
}

func listAndDelete(ctx context.Context, t *testing.T, b *Backend, c client.Client, d backend.Desired[Params]) {
	l, err := b.List(ctx)
	step(t, "List", err)
	found := false
	for _, in := range l {
		found = found || (in.Name == d.Name && in.Ownership == d.Ownership && !in.CreatedAt.IsZero())
	}
	if !found {
		t.Errorf("List() = %v, want the instance with its ownership and creation time", l)
	}
	step(t, "Delete", b.Delete(ctx, d))
	step(t, "second Delete", b.Delete(ctx, d))
	if _, err := b.Observe(ctx, d); !backend.IsNotFound(err) {
		t.Errorf("Observe after Delete = %v, want NotFound", err)
	}
	k := client.ObjectKey{Namespace: d.Params.Namespace, Name: d.Name}
	if rv := resourceVersions(ctx, t, c, k); rv != ",,,," {
		t.Errorf("objects left after Delete (resource versions %s)", rv)
	}

	// The garbage collector knows only the name and the ownership.
	step(t, "Create again", b.Create(ctx, d))
	step(t, "Delete by labels", b.Delete(ctx, backend.Desired[Params]{Name: d.Name, Ownership: d.Ownership}))
	if rv := resourceVersions(ctx, t, c, k); rv != ",,,," {
		t.Errorf("objects left after a Delete by labels (resource versions %s)", rv)
	}
}

func TestIntegrationQuota(t *testing.T) {
	b, c, ns := realCluster(t)
	ctx := t.Context()
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-deployments"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/deployments.apps": resource.MustParse("0")}},
	}
	step(t, "create ResourceQuota", c.Create(ctx, q))
	// Without a quota controller, write the usage it would count.
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{"count/deployments.apps": resource.MustParse("0")}}
	step(t, "update ResourceQuota status", c.Status().Update(ctx, q))

	err := b.Create(ctx, desired(inNamespace(ns)))
	if backend.ClassOf(err) != backend.ClassQuota || !strings.Contains(err.Error(), "exceeded quota") {
		t.Errorf("Create over quota = %v (class %s), want a Quota error", err, backend.ClassOf(err))
	}
}

func TestIntegrationForbidden(t *testing.T) {
	env := kubeenv.Shared(t)
	ns := env.Namespace(t, "proxy")
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "no-rights"}
	b, err := NewForConfig(cfg)
	step(t, "NewForConfig", err)
	t.Cleanup(func() { _ = b.Close() })
	err = b.Create(t.Context(), desired(inNamespace(ns)))
	want := "may not get secrets in namespace " + ns
	if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), want) {
		t.Errorf("Create without RBAC = %v (class %s), want a Permanent error saying %q", err, backend.ClassOf(err), want)
	}
	err = b.CheckHealth(t.Context())
	if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), "may not list deployments.apps cluster wide") {
		t.Errorf("CheckHealth without RBAC = %v, want a Permanent error naming list deployments.apps", err)
	}
}

func TestIntegrationMissingNamespace(t *testing.T) {
	b, _, _ := realCluster(t)
	err := b.Create(t.Context(), desired(inNamespace("does-not-exist")))
	if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), `namespace "does-not-exist" does not exist`) {
		t.Errorf("Create in a missing namespace = %v (class %s), want a Permanent error naming it", err, backend.ClassOf(err))
	}
}

// A team that can edit the proxy's Secret can write a hash at any bcrypt
// cost; at 31 one comparison takes days of CPU. Observe must not run it: it
// reports the htpasswd as drift at once, and Update writes the provider's.
func TestIntegrationSecretHashCost(t *testing.T) {
	b, c, ns := realCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	d := desired(inNamespace(ns))
	step(t, "Create", b.Create(ctx, d))

	s := &corev1.Secret{}
	step(t, "get Secret", c.Get(ctx, client.ObjectKey{Namespace: ns, Name: d.Name}, s))
	s.Data[keyHtpasswd] = []byte(testUser + ":$2y$31$abcdefghijklmnopqrstuuKy1ot2y4BDhYMg8LWLmGkdMjtkBPNjW\n")
	step(t, "edit Secret", c.Update(ctx, s))

	type result struct {
		o   backend.Observation[Observation]
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		o, err := b.Observe(ctx, d)
		done <- result{o, err}
	}()
	select {
	case r := <-done:
		step(t, "Observe", r.err)
		if r.o.UpToDate || !strings.Contains(r.o.Diff, keyHtpasswd) {
			t.Fatalf("Observe after the edit: UpToDate %v, diff %q; want the htpasswd to differ", r.o.UpToDate, r.o.Diff)
		}
		t.Logf("Observe took %v", time.Since(start))
	case <-time.After(5 * time.Second):
		// The comparison keeps a core busy until the test binary exits.
		t.Fatal("Observe still running after 5s: it compares the team's cost-31 hash")
	}

	step(t, "Update", b.Update(ctx, d))
	step(t, "get Secret", c.Get(ctx, client.ObjectKey{Namespace: ns, Name: d.Name}, s))
	if !squid.HtpasswdMatches(s.Data[keyHtpasswd], testUser, testPassword) {
		t.Errorf("after Update the htpasswd %q does not accept the credentials", s.Data[keyHtpasswd])
	}
}
