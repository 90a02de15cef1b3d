/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"maps"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// TestWatchCachePending shows read-your-writes: an object this backend
// wrote is read from the API server until the watch delivers that write.
func TestWatchCachePending(t *testing.T) {
	cm := func(rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testName, ResourceVersion: rv,
			Labels: testOwnership().Labels(backend.KubernetesLabelKeys)}}
	}
	type want struct {
		Pending bool
		// Served: reads get the write's response, not the API server's.
		Served   bool
		Reported int
	}
	cases := map[string]struct {
		reason  string
		deleted bool
		event   func(h toolscache.ResourceEventHandler)
		want    want
	}{
		"NotDelivered": {
			reason: "Until the watch delivers the write, the object is read from the write's response.",
			want:   want{Pending: true, Served: true},
		},
		"OlderVersion": {
			reason: "An event of another version (here the one before the write) leaves it pending, read from the API server: versions are opaque, so another one may be newer.",
			event:  func(h toolscache.ResourceEventHandler) { h.OnUpdate(cm("1"), cm("1")) },
			want:   want{Pending: true},
		},
		"NewerVersion": {
			reason: "An event of a newer version (a relist that skipped the write) is not known to be newer: the API server answers until pendingTTL.",
			event:  func(h toolscache.ResourceEventHandler) { h.OnUpdate(cm("1"), cm("3")) },
			want:   want{Pending: true, Reported: 1},
		},
		"Delivered": {
			reason: "The event of the written version ends it, and reports the owner.",
			event:  func(h toolscache.ResourceEventHandler) { h.OnUpdate(cm("1"), cm("2")) },
			want:   want{Pending: false, Reported: 1},
		},
		"DeleteDelivered": {
			reason:  "The delete event of a deleted object ends it, and reports the owner.",
			deleted: true,
			event:   func(h toolscache.ResourceEventHandler) { h.OnDelete(toolscache.DeletedFinalStateUnknown{Obj: cm("2")}) },
			want:    want{Pending: false, Reported: 1},
		},
		"Created": {
			reason: "The creation of an owned object is reported (a part Update made again must be observed: the reconciler does not requeue after Update), and it ends the pending write.",
			event:  func(h toolscache.ResourceEventHandler) { h.OnAdd(cm("2"), false) },
			want:   want{Pending: false, Reported: 1},
		},
		"InitialList": {
			reason: "The initial list is not a change.",
			event:  func(h toolscache.ResourceEventHandler) { h.OnAdd(cm("2"), true) },
			want:   want{Pending: false, Reported: 0},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWatchCache(&rest.Config{}, nil, nil)
			// A started cache (any will do): wrote records only while one
			// runs.
			w.started, w.cache = true, &informertest.FakeInformers{}
			var got want
			w.setNotify(func(o backend.Ownership) {
				if o == testOwnership() {
					got.Reported++
				}
			})
			w.wrote(cm("2"), "1", tc.deleted)
			if tc.event != nil {
				tc.event(w.handler(reflect.TypeOf(&corev1.ConfigMap{}), true))
			}
			p, pending := w.pending[objectKey{kind: reflect.TypeOf(&corev1.ConfigMap{}), namespace: testNS, name: testName}]
			got.Pending, got.Served = pending, pending && p.obj != nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestOwnWritesServed: while the watch has not delivered a write, a read
// of the object gets it as the write's response had it, from no API
// server, if the cache holds the version the write replaced; after a
// delete, or with any other version in the cache, the API server answers.
func TestOwnWritesServed(t *testing.T) {
	written := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testName, ResourceVersion: "2"},
		Data: map[string]string{"squid.conf": "http_port 3128"}}
	cases := map[string]struct {
		reason     string
		deleted    bool
		cached     string
		key        client.ObjectKey
		wantDirect int
		want       *corev1.ConfigMap
	}{
		"Written": {reason: "The written object is served from the write.",
			cached: "1", key: client.ObjectKeyFromObject(written), want: written},
		"CacheHoldsAnother": {reason: "The cache holds neither the write nor the version it replaced, maybe a newer one: the API server answers.",
			cached: "3", key: client.ObjectKeyFromObject(written), wantDirect: 1, want: &corev1.ConfigMap{}},
		"Deleted": {reason: "A deleted object is read from the API server, which says it is gone.",
			deleted: true, cached: "1", key: client.ObjectKeyFromObject(written), wantDirect: 1, want: &corev1.ConfigMap{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			direct := 0
			kube := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
					direct++
					return kerrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, tc.key.Name)
				},
			}).Build()
			w := newWatchCache(&rest.Config{}, nil, kube)
			kind := reflect.TypeOf(&corev1.ConfigMap{})
			w.started, w.cache = true, &versionCache{version: tc.cached}
			w.informers[kind] = &controllertest.FakeInformer{Synced: true}
			w.wrote(written.DeepCopy(), "1", tc.deleted)
			got := &corev1.ConfigMap{}
			_ = w.Get(context.Background(), tc.key, got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nGet(): -want, +got:\n%s", tc.reason, diff)
			}
			if direct != tc.wantDirect {
				t.Errorf("%s\nreads from the API server: want %d, got %d", tc.reason, tc.wantDirect, direct)
			}
			// What the reader got is a copy: changing it changes no later read.
			got.Data = nil
			again := &corev1.ConfigMap{}
			if _ = w.Get(context.Background(), tc.key, again); !tc.deleted && tc.wantDirect == 0 && again.Data == nil {
				t.Errorf("%s\na reader changed the stored write", tc.reason)
			}
		})
	}
}

// versionCache holds every object at one version.
type versionCache struct {
	informertest.FakeInformers
	version string
}

func (c *versionCache) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	obj.SetResourceVersion(c.version)
	return nil
}

// syncingInformer syncs when told to.
type syncingInformer struct {
	controllertest.FakeInformer
	synced atomic.Bool
}

func (i *syncingInformer) HasSynced() bool { return i.synced.Load() }

// TestFirstReadsAwaitSync: right after the cache started, a read waits for
// its kind's informer to sync and is then served by the cache, not the API
// server; it does not wait past firstSync, nor for a kind whose list or
// watch failed.
func TestFirstReadsAwaitSync(t *testing.T) {
	cases := map[string]struct {
		reason     string
		startedAgo time.Duration
		broken     bool
		syncAfter  time.Duration
		wantDirect int
	}{
		"Syncs": {reason: "A read right after the start waits for the informer, and reads the cache.",
			syncAfter: 100 * time.Millisecond, wantDirect: 0},
		"Late": {reason: "Past firstSync nothing waits: the API server answers.",
			startedAgo: firstSync, syncAfter: time.Hour, wantDirect: 1},
		"Broken": {reason: "A kind whose list failed is not waited for.",
			broken: true, syncAfter: time.Hour, wantDirect: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var direct atomic.Int32
			kube := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
					direct.Add(1)
					return kerrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, testName)
				},
			}).Build()
			w := newWatchCache(&rest.Config{}, nil, kube)
			kind := reflect.TypeOf(&corev1.ConfigMap{})
			i := &syncingInformer{}
			w.started, w.startedAt, w.cache = true, time.Now().Add(-tc.startedAgo), &informertest.FakeInformers{}
			w.informers[kind] = i
			w.broken[kind.String()] = tc.broken
			timer := time.AfterFunc(tc.syncAfter, func() { i.synced.Store(true) })
			defer timer.Stop()
			_ = w.Get(t.Context(), client.ObjectKey{Namespace: testNS, Name: testName}, &corev1.ConfigMap{})
			if got := int(direct.Load()); got != tc.wantDirect {
				t.Errorf("%s\nreads from the API server: want %d, got %d", tc.reason, tc.wantDirect, got)
			}
		})
	}
}

// TestSlimPod shows that the cache's slim pods and nodes answer Observe's
// questions as the full objects do, and keep of a pod's status only what
// those questions read.
func TestSlimPod(t *testing.T) {
	now := metav1.Now()
	full := func(mod func(p *corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "p", ResourceVersion: "7", Labels: selector(testName),
				Annotations: map[string]string{"a": "b"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "squid", Image: "squid", Args: []string{"-N"}}}},
			// As a kubelet reports a ready pod: five conditions, with
			// times.
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9", StartTime: &now, Conditions: []corev1.PodCondition{
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			}, ContainerStatuses: []corev1.ContainerStatus{{Name: "squid", Image: "squid", ImageID: "sha256:x", Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}},
		}
		if mod != nil {
			mod(p)
		}
		return p
	}
	cases := map[string]struct {
		reason string
		pod    *corev1.Pod
	}{
		"Ready": {
			reason: "A ready pod is ready.",
			pod:    full(nil),
		},
		"NotReady": {
			reason: "A pod whose Ready condition is false is not ready.",
			pod:    full(func(p *corev1.Pod) { p.Status.Conditions[2].Status = corev1.ConditionFalse }),
		},
		"Deleting": {
			reason: "A deleting pod is not ready.",
			pod:    full(func(p *corev1.Pod) { p.DeletionTimestamp = &now }),
		},
		"CrashLoop": {
			reason: "A crash-looping container is reported with its last exit.",
			pod: full(func(p *corev1.Pod) {
				p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off"}}
				p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "bad config"}
			}),
		},
		"ImagePull": {
			reason: "A container whose image cannot be pulled is reported with the kubelet's message.",
			pod: full(func(p *corev1.Pod) {
				p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "squid"`}}
			}),
		},
		"Creating": {
			reason: "A container still being created is no problem.",
			pod: full(func(p *corev1.Pod) {
				p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
			}),
		},
		"Unschedulable": {
			reason: "An unschedulable pod is reported.",
			pod: full(func(p *corev1.Pod) {
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes"}}
			}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := slimPod(tc.pod.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			slim := out.(*corev1.Pod)
			type answers struct {
				Ready   bool
				Problem string
				Node    string
				Labels  map[string]string
				Version string
			}
			ask := func(p *corev1.Pod) answers {
				return answers{podReady(p), podProblem([]*corev1.Pod{p}), p.Spec.NodeName, p.Labels, p.ResourceVersion}
			}
			if diff := cmp.Diff(ask(tc.pod), ask(slim)); diff != "" {
				t.Errorf("\n%s\nslimPod: -full, +slim:\n%s", tc.reason, diff)
			}
			if len(slim.Spec.Containers) != 0 || slim.Annotations != nil || slim.ManagedFields != nil {
				t.Errorf("\n%s\nslimPod kept the spec, annotations or managed fields: %+v", tc.reason, slim)
			}
			// Of the status, the one condition Observe reads, and the
			// stuck containers only.
			if len(slim.Status.Conditions) > 1 || slim.Status.PodIP != "" || slim.Status.StartTime != nil {
				t.Errorf("\n%s\nslimPod kept conditions or a status Observe does not read: %+v", tc.reason, slim.Status)
			}
			for _, c := range slim.Status.ContainerStatuses {
				if c.State.Waiting == nil || !stuckReasons[c.State.Waiting.Reason] {
					t.Errorf("\n%s\nslimPod kept a container that is not stuck: %+v", tc.reason, c)
				}
			}
		})
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "203.0.113.7"}},
			Images: []corev1.ContainerImage{{Names: []string{"squid"}, SizeBytes: 1}}},
	}
	out, err := slimNode(node.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: node.Status.Addresses}}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("slimNode: -want, +got:\n%s", diff)
	}
}

// TestCreationsReported shows which creations the watch reports: not those
// of Create, after which the reconciler observes again by itself, but those
// of Update, after which it does not, whether the watch delivers the object
// before or after the create's response.
func TestCreationsReported(t *testing.T) {
	d := desired()
	cases := map[string]struct {
		reason string
		update bool
		late   bool
	}{
		"Create": {
			reason: "The objects Create makes are not reported.",
		},
		"CreateDeliveredLate": {
			reason: "The objects Create makes are not reported, also when the watch delivers them after the response.",
			late:   true,
		},
		"Update": {
			reason: "The objects Update makes again are reported, one report each.",
			update: true,
		},
		"UpdateDeliveredLate": {
			reason: "The objects Update makes again are reported when the watch delivers them after the response.",
			update: true,
			late:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var w *watchCache
			var late []client.Object
			creates := 0
			deliver := func(o client.Object) {
				w.handler(reflect.TypeOf(o), true).OnAdd(o, false)
			}
			c := failing(t, interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
				if err := c.Create(ctx, o, opts...); err != nil {
					return err
				}
				creates++
				if tc.late {
					late = append(late, o.DeepCopyObject().(client.Object)) //nolint:forcetypeassert // A copy of a client.Object.
					return nil
				}
				deliver(o)
				return nil
			}})
			w = newWatchCache(&rest.Config{}, nil, c)
			w.started, w.cache = true, &informertest.FakeInformers{}
			reported := 0
			w.setNotify(func(o backend.Ownership) {
				if o == d.Ownership {
					reported++
				}
			})
			b := New(c)
			b.watch, b.kube = w, recording{kube: c, w: w}
			run, want := b.Create, 0
			if tc.update {
				run = b.Update
			}
			if err := run(t.Context(), d); err != nil {
				t.Fatal(err)
			}
			if tc.update {
				want = creates
			}
			for _, o := range late {
				deliver(o)
			}
			if creates == 0 || reported != want {
				t.Errorf("%s\n%d objects created, reported %d times, want %d", tc.reason, creates, reported, want)
			}
		})
	}
}

// TestSlimConfigMap shows that the cache's slim ConfigMaps compare as the
// full ones do, hold no configuration file, and that the key of the
// checksum cannot come from an API server.
func TestSlimConfigMap(t *testing.T) {
	d := desired()
	o, err := build(d, []byte("h"))
	if err != nil {
		t.Fatal(err)
	}
	full := func(mod func(cm *corev1.ConfigMap)) *corev1.ConfigMap {
		cm := o.configMap.DeepCopy()
		cm.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
		if mod != nil {
			mod(cm)
		}
		return cm
	}
	cases := map[string]struct {
		reason string
		cm     *corev1.ConfigMap
		differ bool
	}{
		"Same": {
			reason: "The rendered configuration is no difference.",
			cm:     full(nil),
		},
		"Changed": {
			reason: "An edited configuration is a difference.",
			cm:     full(func(cm *corev1.ConfigMap) { cm.Data[keySquidConf] += "http_access allow all\n" }),
			differ: true,
		},
		"Missing": {
			reason: "A ConfigMap without the file is a difference.",
			cm:     full(func(cm *corev1.ConfigMap) { delete(cm.Data, keySquidConf) }),
			differ: true,
		},
		"OtherKeys": {
			reason: "Keys others added are no difference.",
			cm: full(func(cm *corev1.ConfigMap) {
				cm.Data["extra"] = "x"
				cm.BinaryData = map[string][]byte{"b": {1}}
			}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := slimConfigMap(tc.cm.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			slim := out.(*corev1.ConfigMap) //nolint:forcetypeassert // slimConfigMap returns a ConfigMap.
			fullDiff, slimDiff := diffConfigMap(o.configMap, tc.cm, o.checksum), diffConfigMap(o.configMap, slim, o.checksum)
			if diff := cmp.Diff(fullDiff, slimDiff); diff != "" {
				t.Errorf("\n%s\ndiffConfigMap: -full, +slim:\n%s", tc.reason, diff)
			}
			if (len(fullDiff) > 0) != tc.differ {
				t.Errorf("\n%s\ndiffConfigMap: %q", tc.reason, fullDiff)
			}
			if _, ok := slim.Data[keySquidConf]; ok || slim.BinaryData != nil || slim.ManagedFields != nil {
				t.Errorf("\n%s\nslimConfigMap kept the file, binary data or managed fields", tc.reason)
			}
		})
	}
	if len(validation.IsConfigMapKey(keyConfigSum)) == 0 {
		t.Errorf("%q is a valid ConfigMap key: a ConfigMap of the API server could forge the checksum", keyConfigSum)
	}
}

// TestDeploymentUpdatesReported shows which updates of a Deployment reach
// its resource: those that change what Observe reports, not the Deployment
// controller's other status writes.
func TestDeploymentUpdatesReported(t *testing.T) {
	d := desired()
	base := func() *appsv1.Deployment {
		dep := mustBuild(t, d).deployment
		dep.ResourceVersion, dep.Generation = "1", 1
		dep.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetCreated"}}}
		return dep
	}
	cases := map[string]struct {
		reason string
		change func(*appsv1.Deployment)
		want   int
	}{
		"Resync": {
			reason: "The same version again is a resync, not a change.",
			change: func(*appsv1.Deployment) {},
		},
		"ConditionReason": {
			reason: "A Progressing condition's new reason, the revision annotation and the ready count change nothing Observe reports.",
			change: func(dep *appsv1.Deployment) {
				dep.ResourceVersion = "2"
				dep.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1"}
				dep.Status.ReadyReplicas = 1
				dep.Status.Conditions[0].Reason = "ReplicaSetUpdated"
			},
		},
		"Available": {
			reason: "A replica that became available makes the proxy ready.",
			change: func(dep *appsv1.Deployment) {
				dep.ResourceVersion = "2"
				dep.Status.AvailableReplicas, dep.Status.UnavailableReplicas = 1, 0
			},
			want: 1,
		},
		"Stuck": {
			reason: "A rollout past its deadline is reported: the message says so.",
			change: func(dep *appsv1.Deployment) {
				dep.ResourceVersion = "2"
				dep.Status.Conditions[0] = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: reasonDeadline}
			},
			want: 1,
		},
		"Spec": {
			reason: "A changed spec (a new generation) is drift to repair.",
			change: func(dep *appsv1.Deployment) {
				dep.ResourceVersion, dep.Generation = "2", 2
				dep.Spec.Replicas = ptr.To[int32](5)
			},
			want: 1,
		},
		"Labels": {
			reason: "Changed labels may change the owner.",
			change: func(dep *appsv1.Deployment) {
				dep.ResourceVersion = "2"
				dep.Labels = maps.Clone(dep.Labels)
				dep.Labels[LabelComponent] = "other"
			},
			want: 1,
		},
		"Deleting": {
			reason: "A Deployment being deleted is reported.",
			change: func(dep *appsv1.Deployment) {
				dep.ResourceVersion = "2"
				dep.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			},
			want: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWatchCache(&rest.Config{}, nil, fakeCluster(t))
			w.started, w.cache = true, &informertest.FakeInformers{}
			reported := 0
			w.setNotify(func(backend.Ownership) { reported++ })
			old := base()
			dep := old.DeepCopy()
			tc.change(dep)
			w.handler(reflect.TypeOf(dep), true).OnUpdate(old, dep)
			if reported != tc.want {
				t.Errorf("%s\nreported %d times, want %d", tc.reason, reported, tc.want)
			}
		})
	}
}

// TestPodReadinessReported: a pod's readiness changes the proxy's egress
// IPs, so it is reported, with the owner its labels name; its other status
// updates are not.
func TestPodReadinessReported(t *testing.T) {
	pod := func(rv string, ready bool) *corev1.Pod {
		p := trafficPod("p", ready)
		p.ResourceVersion, p.Labels = rv, mustBuild(t, desired()).deployment.Spec.Template.Labels
		return p
	}
	cases := map[string]struct {
		reason   string
		old, new *corev1.Pod
		want     int
	}{
		"BecameReady":  {reason: "A pod that became ready adds its node's address.", old: pod("1", false), new: pod("2", true), want: 1},
		"StoppedReady": {reason: "A pod no longer ready takes its node's address away.", old: pod("1", true), new: pod("2", false), want: 1},
		"OtherStatus":  {reason: "Another status update of a ready pod changes nothing Observe reports.", old: pod("1", true), new: pod("2", true)},
		"Resync":       {reason: "A resync is no change.", old: pod("1", false), new: pod("1", true)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWatchCache(&rest.Config{}, nil, fakeCluster(t))
			w.started, w.cache = true, &informertest.FakeInformers{}
			var got []backend.Ownership
			w.setNotify(func(o backend.Ownership) { got = append(got, o) })
			w.handler(reflect.TypeOf(tc.new), false).OnUpdate(tc.old, tc.new)
			if len(got) != tc.want {
				t.Fatalf("%s\nreported %d times, want %d", tc.reason, len(got), tc.want)
			}
			if tc.want > 0 && got[0] != testOwnership() {
				t.Errorf("%s\nreported %+v, want the pod's owner %+v", tc.reason, got[0], testOwnership())
			}
		})
	}
}

// TestWatchEventsVouch: an event with news from the API server vouches for
// the target as a liveness check would; a resync does not.
func TestWatchEventsVouch(t *testing.T) {
	cm := func(rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testName, ResourceVersion: rv}}
	}
	cases := map[string]struct {
		reason string
		event  func(h toolscache.ResourceEventHandler)
		probes int
	}{
		"Update":  {reason: "A watched update answers for the target: no check is sent.", event: func(h toolscache.ResourceEventHandler) { h.OnUpdate(cm("1"), cm("2")) }, probes: 1},
		"Add":     {reason: "A watched creation too.", event: func(h toolscache.ResourceEventHandler) { h.OnAdd(cm("2"), false) }, probes: 1},
		"Delete":  {reason: "A watched deletion too.", event: func(h toolscache.ResourceEventHandler) { h.OnDelete(cm("2")) }, probes: 1},
		"Resync":  {reason: "A resync comes from the informer, not the API server: the check is sent.", event: func(h toolscache.ResourceEventHandler) { h.OnUpdate(cm("1"), cm("1")) }, probes: 2},
		"NoEvent": {reason: "Without events the check is sent once an interval.", probes: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			now := t0
			probes := 0
			w := newWatchCache(&rest.Config{}, nil, nil)
			w.live = newLiveness(func(context.Context) error { probes++; return nil })
			w.live.now = func() time.Time { return now }
			_ = w.live.check(t.Context())
			now = t0.Add(liveInterval - time.Second)
			if tc.event != nil {
				tc.event(w.handler(reflect.TypeOf(&corev1.ConfigMap{}), false))
			}
			now = t0.Add(liveInterval + time.Second)
			_ = w.live.check(t.Context())
			if probes != tc.probes {
				t.Errorf("%s\nprobes: got %d, want %d", tc.reason, probes, tc.probes)
			}
		})
	}
}

// TestPodInstance shows which pods the instance index files, and under
// which key: an instance's pods, by namespace, and no other pod.
func TestPodInstance(t *testing.T) {
	pod := func(ns string, l map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: l}}
	}
	cases := map[string]struct {
		reason string
		obj    any
		want   []string
	}{
		"Instance": {
			reason: "A pod of an instance is filed under its namespace and instance.",
			obj:    pod(testNS, selector(testName)),
			want:   []string{testNS + "/" + testName},
		},
		"OtherApp": {
			reason: "A pod with the instance label of another app is not an instance's.",
			obj:    pod(testNS, map[string]string{LabelName: "other", LabelInstance: testName}),
		},
		"NoInstance": {
			reason: "A pod without an instance label is filed nowhere.",
			obj:    pod(testNS, map[string]string{LabelName: appName}),
		},
		"NotAPod": {
			reason: "Only pods are indexed.",
			obj:    &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: selector(testName)}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := podInstance(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\npodInstance(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
