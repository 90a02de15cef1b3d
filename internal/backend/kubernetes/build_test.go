/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

func TestBuild(t *testing.T) {
	type want struct {
		replicas  int32
		image     string
		pdb       bool
		svcType   corev1.ServiceType
		etp       corev1.ServiceExternalTrafficPolicy
		lbIP      string
		port      int32
		errClass  backend.Class
		confLines []string
	}
	cases := map[string]struct {
		reason string
		d      backend.Desired[Params]
		want   want
	}{
		"Defaults": {
			reason: "Unset parameters take the API defaults: 2 replicas (so a PDB), the default image, a ClusterIP Service.",
			d: desired(func(d *backend.Desired[Params]) {
				d.Params = Params{Namespace: testNS}
				d.Proxy.Port = 0
			}),
			want: want{replicas: 2, image: DefaultImage, pdb: true, svcType: corev1.ServiceTypeClusterIP, port: backend.DefaultPort,
				confLines: []string{
					"access_log stdio:/var/log/squid/access.log", "cache_log /var/log/squid/cache.log",
					"pid_filename /run/squid.pid", "coredump_dir /var/spool/squid", "/etc/squid/egressproxy/htpasswd",
				}},
		},
		"OneReplicaNoPDB": {
			reason: "A PodDisruptionBudget of minAvailable 1 over one pod would block node drains.",
			d:      desired(withReplicas(1)),
			want:   want{replicas: 1, image: DefaultImage, svcType: corev1.ServiceTypeClusterIP, port: 3128},
		},
		"LoadBalancer": {
			reason: "A LoadBalancer keeps client addresses (Local) and asks for the given IP.",
			d: desired(withServiceType(corev1.ServiceTypeLoadBalancer), withImage("squid:6"), func(d *backend.Desired[Params]) {
				d.Params.LoadBalancerIP = ptr.To("127.0.0.10")
				d.Proxy.Port = 8080
			}),
			want: want{replicas: 2, image: "squid:6", pdb: true, svcType: corev1.ServiceTypeLoadBalancer,
				etp: corev1.ServiceExternalTrafficPolicyLocal, lbIP: "127.0.0.10", port: 8080},
		},
		"NodePort": {
			reason: "A NodePort Service keeps client addresses too, and has no load balancer IP.",
			d: desired(withServiceType(corev1.ServiceTypeNodePort), func(d *backend.Desired[Params]) {
				d.Params.LoadBalancerIP = ptr.To("127.0.0.10")
			}),
			want: want{replicas: 2, image: DefaultImage, pdb: true, svcType: corev1.ServiceTypeNodePort,
				etp: corev1.ServiceExternalTrafficPolicyLocal, port: 3128},
		},
		"InvalidPolicy": {
			reason: "A policy squid cannot run is a Permanent error.",
			d:      desired(withDestinations("bad host")),
			want:   want{errClass: backend.ClassPermanent},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, err := build(tc.d, []byte("h"))
			if diff := cmp.Diff(tc.want.errClass, backend.ClassOf(err)); diff != "" {
				t.Fatalf("%s\nbuild(...): -want error class, +got:\n%s\n%v", tc.reason, diff, err)
			}
			if err != nil {
				return
			}
			c := o.deployment.Spec.Template.Spec.Containers[0]
			got := want{
				replicas: *o.deployment.Spec.Replicas, image: c.Image, pdb: o.pdb != nil,
				svcType: o.service.Spec.Type, etp: o.service.Spec.ExternalTrafficPolicy, lbIP: o.service.Spec.LoadBalancerIP,
				port: o.service.Spec.Ports[0].Port, confLines: tc.want.confLines,
			}
			for _, l := range tc.want.confLines {
				if !strings.Contains(o.configMap.Data[keySquidConf], l) {
					t.Errorf("%s\nsquid.conf lacks %q", tc.reason, l)
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nbuild(...): -want, +got:\n%s", tc.reason, diff)
			}
			if c.Ports[0].ContainerPort != got.port || c.ReadinessProbe.TCPSocket.Port.IntVal != got.port {
				t.Errorf("%s\ncontainer port and probes must use the proxy port %d", tc.reason, got.port)
			}
			if o.deployment.Spec.Template.Annotations[AnnotationConfigChecksum] != o.checksum || o.checksum == "" {
				t.Errorf("%s\nthe pod template must carry the config checksum", tc.reason)
			}
		})
	}
}

func TestBuildLabels(t *testing.T) {
	o := mustBuild(t, desired())
	want := testOwnership().Labels(backend.KubernetesLabelKeys)
	want[LabelName] = appName
	want[LabelInstance] = testName
	want[LabelComponent] = component
	want[LabelManagedBy] = backend.ManagedByValue
	for _, obj := range []client.Object{o.configMap, o.secret, o.deployment, o.service, o.pdb} {
		if diff := cmp.Diff(want, obj.GetLabels()); diff != "" {
			t.Errorf("%T labels: -want, +got:\n%s", obj, diff)
		}
		if obj.GetName() != testName || obj.GetNamespace() != testNS {
			t.Errorf("%T is %s/%s, want %s/%s", obj, obj.GetNamespace(), obj.GetName(), testNS, testName)
		}
	}
}

// TestBuildMapsOwn shows that the objects build makes for writing hold
// label maps of their own: a write's response is decoded into its object,
// and labels an admission webhook added to one must not turn up in the
// others. Only buildToCompare's objects, never written, share them.
func TestBuildMapsOwn(t *testing.T) {
	o := withReplicas(2)
	objs := mustBuild(t, desired(o))
	objs.configMap.Labels["added-by-webhook"] = "x"
	objs.deployment.Spec.Selector.MatchLabels["added-by-webhook"] = "x"
	for _, l := range []map[string]string{
		objs.secret.Labels, objs.deployment.Labels, objs.deployment.Spec.Template.Labels,
		objs.service.Labels, objs.service.Spec.Selector, objs.pdb.Labels, objs.pdb.Spec.Selector.MatchLabels,
	} {
		if _, ok := l["added-by-webhook"]; ok {
			t.Errorf("build(...): a label added to one object's map is in another's: %v", l)
		}
	}
	var sums squid.Sums
	shared, err := buildToCompare(&sums, desired(o), []byte("h"))
	if err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(shared.secret.Labels).UnsafePointer() != reflect.ValueOf(shared.deployment.Labels).UnsafePointer() {
		t.Error("buildToCompare(...): the objects to compare hold label maps of their own, want one shared")
	}
}

func TestChecksum(t *testing.T) {
	cases := map[string]struct {
		reason string
		other  backend.Desired[Params]
		same   bool
	}{
		"AllowlistChange": {
			reason: "A new allowlist changes the checksum, which rolls the pods.",
			other:  desired(withDestinations("api.example.com", ".example.org")),
		},
		"PasswordChange": {
			reason: "A new password is not in squid.conf (its htpasswd checksum rolls the pods, TestHtpasswdChecksum).",
			other:  desired(withPassword("another one")),
			same:   true,
		},
		"ReplicasChange": {
			reason: "Scaling does not change the configuration.",
			other:  desired(withReplicas(5)),
			same:   true,
		},
	}
	base := mustBuild(t, desired()).checksum
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := mustBuild(t, tc.other).checksum == base
			if diff := cmp.Diff(tc.same, got); diff != "" {
				t.Errorf("%s\nsame checksum: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestResources(t *testing.T) {
	q := resource.MustParse
	cases := map[string]struct {
		reason string
		in     *corev1.ResourceRequirements
		want   corev1.ResourceRequirements
	}{
		"Nil": {
			reason: "No resources, no requests.",
			want:   corev1.ResourceRequirements{},
		},
		"LimitsOnly": {
			reason: "A limit without a request gets the limit as request, as the API server does for pods.",
			in:     &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: q("500m")}},
			want: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: q("500m")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: q("500m")},
			},
		},
		"RequestKept": {
			reason: "An explicit request is kept.",
			in: &corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceMemory: q("256Mi")},
				Requests: corev1.ResourceList{corev1.ResourceMemory: q("128Mi")},
			},
			want: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceMemory: q("256Mi")},
				Requests: corev1.ResourceList{corev1.ResourceMemory: q("128Mi")},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := resources(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nresources(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestClusterID(t *testing.T) {
	cases := map[string]struct {
		host string
		want string
	}{
		"URL":      {host: "https://127.0.0.1:6443", want: "127.0.0.1:6443"},
		"Path":     {host: "https://rancher.example.com/k8s/clusters/c-abc/", want: "rancher.example.com_k8s_clusters_c-abc"},
		"HostPort": {host: "127.0.0.1:6443", want: "127.0.0.1:6443"},
		"IPv6":     {host: "https://[::1]:6443", want: "[::1]:6443"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ClusterID(tc.host)); diff != "" {
				t.Errorf("ClusterID(%q): -want, +got:\n%s", tc.host, diff)
			}
		})
	}
}

// TestBuildPodSecurity pins the hardening of the proxy pods: the restricted
// Pod Security profile and more (TestIntegrationPodSecurity has the API
// server judge it, TestSquidRunsRestricted runs squid so).
func TestBuildPodSecurity(t *testing.T) {
	s := mustBuild(t, desired()).deployment.Spec.Template.Spec
	c := s.Containers[0]
	for _, other := range s.Containers[1:] {
		if diff := cmp.Diff(c.SecurityContext, other.SecurityContext); diff != "" {
			t.Errorf("container %s must be as hardened as squid's: -squid, +%s:\n%s", other.Name, other.Name, diff)
		}
		for _, m := range other.VolumeMounts {
			if !m.ReadOnly {
				t.Errorf("container %s mounts %s writable, want read-only", other.Name, m.Name)
			}
		}
	}
	got := map[string]any{
		"automountServiceAccountToken": ptr.Deref(s.AutomountServiceAccountToken, true),
		"runAsNonRoot":                 ptr.Deref(s.SecurityContext.RunAsNonRoot, false),
		"runAsUser":                    ptr.Deref(s.SecurityContext.RunAsUser, 0),
		"runAsGroup":                   ptr.Deref(s.SecurityContext.RunAsGroup, 0),
		"seccompProfile":               s.SecurityContext.SeccompProfile.Type,
		"allowPrivilegeEscalation":     ptr.Deref(c.SecurityContext.AllowPrivilegeEscalation, true),
		"readOnlyRootFilesystem":       ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false),
		"capabilities":                 c.SecurityContext.Capabilities,
	}
	want := map[string]any{
		"automountServiceAccountToken": false,
		"runAsNonRoot":                 true,
		"runAsUser":                    int64(13),
		"runAsGroup":                   int64(13),
		"seccompProfile":               corev1.SeccompProfileTypeRuntimeDefault,
		"allowPrivilegeEscalation":     false,
		"readOnlyRootFilesystem":       true,
		"capabilities":                 &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pod hardening: -want, +got:\n%s", diff)
	}

	// Every path squid writes must be in an emptyDir: the root file system
	// is read-only.
	emptyDirs := map[string]bool{}
	for _, v := range s.Volumes {
		if v.EmptyDir != nil {
			emptyDirs[v.Name] = true
		}
	}
	writable := func(p string) bool {
		for _, m := range c.VolumeMounts {
			if emptyDirs[m.Name] && !m.ReadOnly && strings.HasPrefix(p, m.MountPath+"/") {
				return true
			}
		}
		return false
	}
	for _, p := range []string{pidFile, accessLog, cacheLog, spoolDir + "/core"} {
		if !writable(p) {
			t.Errorf("squid writes %s, which is in no writable emptyDir", p)
		}
	}
	if c.Command[0] != shell || !strings.HasSuffix(c.Command[len(c.Command)-1], "exec "+squidBinary+" -N -f "+squidConfPath) {
		t.Errorf("the container must exec squid in the foreground from its start script, got %q", c.Command)
	}
}

// TestBuildHandover pins what lets a change roll without refusing a
// connection or cutting a tunnel (docs/backends.md): all new pods at once
// and never fewer ready ones, a quick readiness probe, a pause before squid
// stops, and a grace period above squid's shutdown_lifetime.
func TestBuildHandover(t *testing.T) {
	o := mustBuild(t, desired())
	dep := o.deployment
	s := dep.Spec.Template.Spec
	c := s.Containers[0]
	got := map[string]any{
		"maxSurge":                      dep.Spec.Strategy.RollingUpdate.MaxSurge.String(),
		"maxUnavailable":                dep.Spec.Strategy.RollingUpdate.MaxUnavailable.String(),
		"readiness":                     [2]int32{c.ReadinessProbe.InitialDelaySeconds, c.ReadinessProbe.PeriodSeconds},
		"preStopSleep":                  c.Lifecycle.PreStop.Sleep.Seconds,
		"terminationGracePeriodSeconds": ptr.Deref(s.TerminationGracePeriodSeconds, 0),
		"containers":                    []string{s.Containers[0].Name, s.Containers[1].Name},
	}
	want := map[string]any{
		"maxSurge":                      "100%",
		"maxUnavailable":                "0",
		"readiness":                     [2]int32{1, 2},
		"preStopSleep":                  int64(5),
		"terminationGracePeriodSeconds": int64(45),
		"containers":                    []string{"squid", "traffic"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("handover: -want, +got:\n%s", diff)
	}
	if !strings.Contains(o.configMap.Data[keySquidConf], "shutdown_lifetime") && squid.TrafficAWK != "" {
		t.Errorf("squid.conf must set shutdown_lifetime below the grace period")
	}
	if grace, life := time.Duration(ptr.Deref(s.TerminationGracePeriodSeconds, 0))*time.Second, shutdownLifetime+preStopSleep*time.Second; grace <= life {
		t.Errorf("the grace period %s must exceed the pre-stop pause and squid's shutdown_lifetime (%s)", grace, life)
	}
	if !strings.Contains(c.Command[2], "awk "+squid.AWKLineByLine+" -v out="+trafficFile+" '") {
		t.Errorf("the access log must go through the traffic counter, read line by line, got %q", c.Command[2])
	}
	if tc := s.Containers[1]; !strings.Contains(tc.Command[2], "cat "+trafficFile) || tc.Image != c.Image {
		t.Errorf("the traffic container must print %s with the squid image, got %q (%s)", trafficFile, tc.Command, tc.Image)
	}
}

// TestHtpasswdChecksum shows which changes roll the pods through the
// htpasswd checksum: a new file does (a rotation is in force once new pods
// run, not after the kubelet's Secret sync), the same file does not.
func TestHtpasswdChecksum(t *testing.T) {
	sum := func(d backend.Desired[Params], htpasswd string) string {
		o, err := build(d, []byte(htpasswd))
		if err != nil {
			t.Fatal(err)
		}
		return o.deployment.Spec.Template.Annotations[AnnotationHtpasswdChecksum]
	}
	base := sum(desired(), "user:$2y$05$old")
	cases := map[string]struct {
		reason string
		d      backend.Desired[Params]
		file   string
		same   bool
	}{
		"NewFile": {
			reason: "A rotated password's new file rolls the pods.",
			d:      desired(), file: "user:$2y$05$new",
		},
		"SameFile": {
			reason: "The kept file of an unchanged password rolls nothing.",
			d:      desired(withReplicas(5)), file: "user:$2y$05$old", same: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := sum(tc.d, tc.file)
			if diff := cmp.Diff(tc.same, got == base); diff != "" {
				t.Errorf("%s\nsame htpasswd checksum: -want, +got:\n%s", tc.reason, diff)
			}
			if strings.Contains(got, "$2y$") || got == "" {
				t.Errorf("%s\nthe annotation must be a checksum, not the file: %q", tc.reason, got)
			}
		})
	}
}
