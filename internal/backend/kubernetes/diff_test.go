/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

func TestDiffDeployment(t *testing.T) {
	base := func(t *testing.T) *appsv1.Deployment { return mustBuild(t, desired()).deployment }
	cases := map[string]struct {
		reason  string
		wantMod func(*appsv1.Deployment)
		got     func(*appsv1.Deployment) *appsv1.Deployment
		want    []string
	}{
		"Same": {
			reason: "An unchanged Deployment has no difference.",
			got:    func(d *appsv1.Deployment) *appsv1.Deployment { return d },
		},
		"ServerDefaults": {
			reason: "Defaults, controller annotations, extra labels and injected sidecars are not drift.",
			got:    serverDefaulted,
		},
		"CanonicalQuantities": {
			reason: "The API server stores 1000m as 1: quantities compare by value.",
			wantMod: func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m")}
			},
			got: func(d *appsv1.Deployment) *appsv1.Deployment {
				d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
				return d
			},
		},
		"Replicas": {
			reason: "An edited replica count is drift.",
			got: func(d *appsv1.Deployment) *appsv1.Deployment {
				d.Spec.Replicas = ptr.To[int32](5)
				return d
			},
			want: []string{"Deployment spec.replicas is 5, want 2"},
		},
		"ImageAndChecksum": {
			reason: "An edited image and an old configuration are drift.",
			got: func(d *appsv1.Deployment) *appsv1.Deployment {
				d.Spec.Template.Spec.Containers[0].Image = "evil:1"
				d.Spec.Template.Annotations[AnnotationConfigChecksum] = "old"
				return d
			},
			want: []string{
				`Deployment pod template config checksum is "old", want "` + mustBuild(t, desired()).checksum + `"`,
				`Deployment container squid image is "evil:1", want "` + DefaultImage + `"`,
			},
		},
		"OwnershipLabel": {
			reason: "A removed label is drift.",
			got: func(d *appsv1.Deployment) *appsv1.Deployment {
				delete(d.Labels, LabelComponent)
				return d
			},
			want: []string{`Deployment label app.kubernetes.io/component is "", want "proxy"`},
		},
		"MissingVolumeAndContainer": {
			reason: "A removed volume or container is drift.",
			got: func(d *appsv1.Deployment) *appsv1.Deployment {
				d.Spec.Template.Spec.Volumes = d.Spec.Template.Spec.Volumes[:1]
				d.Spec.Template.Spec.Containers[0].Name = "other"
				return d
			},
			want: []string{
				"Deployment pod spec.volumes has no htpasswd",
				"Deployment pod spec.volumes has no run",
				"Deployment pod spec.volumes has no spool",
				"Deployment pod spec.volumes has no logs",
				"Deployment pod spec.containers has no squid",
			},
		},
		"Handover": {
			reason: "A pod template without the handover settings of a rollout (an older provider's) is drift: a change must not cut tunnels.",
			got: func(d *appsv1.Deployment) *appsv1.Deployment {
				d.Spec.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(1))
				d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
				d.Spec.Template.Spec.Containers[0].Lifecycle = nil
				return d
			},
			want: []string{
				"Deployment spec.strategy differs",
				"Deployment pod spec.terminationGracePeriodSeconds is 30, want 45",
				"Deployment container squid lifecycle differs",
			},
		},
		"HtpasswdChecksum": {
			reason: "Pods of another htpasswd are drift, named without either sum.",
			got: func(d *appsv1.Deployment) *appsv1.Deployment {
				d.Spec.Template.Annotations[AnnotationHtpasswdChecksum] = "old"
				return d
			},
			want: []string{"Deployment pod template htpasswd checksum differs from the stored htpasswd's"},
		},
		"NoTrafficContainer": {
			reason: "A Deployment of an older provider has no traffic container: drift, so Update adds it.",
			got: func(d *appsv1.Deployment) *appsv1.Deployment {
				d.Spec.Template.Spec.Containers = d.Spec.Template.Spec.Containers[:1]
				return d
			},
			want: []string{"Deployment pod spec.containers has no traffic"},
		},
		"Hardening": {
			reason: "A pod that gets a token, runs as root, may write its root file system or escalate is drift.",
			got: func(d *appsv1.Deployment) *appsv1.Deployment {
				s := &d.Spec.Template.Spec
				s.AutomountServiceAccountToken = nil
				s.SecurityContext.RunAsUser = ptr.To[int64](0)
				c := &s.Containers[0]
				c.SecurityContext.ReadOnlyRootFilesystem = ptr.To(false)
				c.SecurityContext.Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}
				c.Command = nil
				return d
			},
			want: []string{
				"Deployment pod spec.automountServiceAccountToken differs",
				"Deployment pod spec.securityContext differs",
				"Deployment container squid command differs",
				"Deployment container squid securityContext differs",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := base(t)
			if tc.wantMod != nil {
				tc.wantMod(want)
			}
			got := diffDeployment(want, tc.got(base(t)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ndiffDeployment(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDiffService(t *testing.T) {
	base := func(t *testing.T) *corev1.Service {
		return mustBuild(t, desired(withServiceType(corev1.ServiceTypeNodePort))).service
	}
	cases := map[string]struct {
		reason string
		got    func(*corev1.Service) *corev1.Service
		want   []string
	}{
		"ServerDefaults": {
			reason: "Allocated IPs and node ports and defaulted fields are not drift.",
			got: func(s *corev1.Service) *corev1.Service {
				s.Spec.ClusterIP = "10.96.0.10"
				s.Spec.ClusterIPs = []string{"10.96.0.10"}
				s.Spec.Ports[0].NodePort = 31000
				s.Spec.SessionAffinity = corev1.ServiceAffinityNone
				s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
				s.Annotations = map[string]string{"cloud": "x"}
				return s
			},
		},
		"Type": {
			reason: "A changed type is drift.",
			got: func(s *corev1.Service) *corev1.Service {
				s.Spec.Type = corev1.ServiceTypeClusterIP
				s.Spec.ExternalTrafficPolicy = ""
				return s
			},
			want: []string{"Service spec.type is ClusterIP, want NodePort", `Service spec.externalTrafficPolicy is "", want "Local"`},
		},
		"PortAndSelector": {
			reason: "A changed port or selector is drift.",
			got: func(s *corev1.Service) *corev1.Service {
				s.Spec.Ports[0].TargetPort = intstr.FromInt32(80)
				s.Spec.Selector = map[string]string{"app": "other"}
				return s
			},
			want: []string{"Service spec.selector differs", "Service spec.ports differs"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := diffService(base(t), tc.got(base(t)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ndiffService(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDiffSecret(t *testing.T) {
	h, err := squid.Htpasswd(testUser, testPassword)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason   string
		password string
		data     []byte
		want     []string
	}{
		"Matches": {
			reason:   "A file that accepts the password is up to date, whatever its salt.",
			password: testPassword, data: h,
		},
		"Rotated": {
			reason:   "A file that does not accept the new password is drift.",
			password: "rotated", data: h,
			want: []string{"Secret htpasswd does not accept the current credentials"},
		},
		"Empty": {
			reason:   "An emptied Secret is drift.",
			password: testPassword,
			want:     []string{"Secret htpasswd does not accept the current credentials"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := mustBuild(t, desired()).secret
			got := want.DeepCopy()
			got.Data = map[string][]byte{keyHtpasswd: tc.data}
			if diff := cmp.Diff(tc.want, diffSecret(squid.NewVerifier(), want, got, testUser, tc.password)); diff != "" {
				t.Errorf("%s\ndiffSecret(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDiffPDB(t *testing.T) {
	pdb := func(t *testing.T) *policyv1.PodDisruptionBudget { return mustBuild(t, desired()).pdb }
	cases := map[string]struct {
		reason string
		want   func(t *testing.T) *policyv1.PodDisruptionBudget
		got    func(t *testing.T) *policyv1.PodDisruptionBudget
		diff   []string
	}{
		"NoneWanted": {
			reason: "One replica, no PDB: up to date.",
			want:   func(*testing.T) *policyv1.PodDisruptionBudget { return nil },
			got:    func(*testing.T) *policyv1.PodDisruptionBudget { return nil },
		},
		"Leftover": {
			reason: "A PDB left after scaling to one replica is drift.",
			want:   func(*testing.T) *policyv1.PodDisruptionBudget { return nil },
			got:    pdb,
			diff:   []string{"PodDisruptionBudget exists but the proxy has one replica"},
		},
		"Missing": {
			reason: "A missing PDB is drift.",
			want:   pdb,
			got:    func(*testing.T) *policyv1.PodDisruptionBudget { return nil },
			diff:   []string{"PodDisruptionBudget is missing"},
		},
		"Edited": {
			reason: "An edited minAvailable is drift.",
			want:   pdb,
			got: func(t *testing.T) *policyv1.PodDisruptionBudget {
				p := pdb(t)
				p.Spec.MinAvailable = ptr.To(intstr.FromInt32(2))
				return p
			},
			diff: []string{"PodDisruptionBudget spec.minAvailable differs"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.diff, diffPDB(tc.want(t), tc.got(t))); diff != "" {
				t.Errorf("%s\ndiffPDB(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestMergeDeployment(t *testing.T) {
	want := mustBuild(t, desired(withReplicas(3), withImage("squid:7"), withDestinations(".example.org"))).deployment
	got := serverDefaulted(mustBuild(t, desired()).deployment)
	// As a Deployment made before the pods were hardened, and before
	// changes rolled without an outage (no traffic container, no
	// handover settings, no htpasswd checksum).
	got.Spec.Template.Spec.SecurityContext.RunAsUser = nil
	got.Spec.Template.Spec.AutomountServiceAccountToken = nil
	got.Spec.Template.Spec.Containers = slices.DeleteFunc(got.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == trafficName })
	got.Spec.Template.Spec.Containers[0].Lifecycle = nil
	got.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	delete(got.Spec.Template.Annotations, AnnotationHtpasswdChecksum)
	mergeDeployment(want, got)
	if diff := diffDeployment(want, got); diff != nil {
		t.Errorf("after mergeDeployment, diffDeployment(...) = %v, want none", diff)
	}
	tmpl := got.Spec.Template
	if tmpl.Annotations["kubectl.kubernetes.io/restartedAt"] == "" || len(tmpl.Spec.Containers) != 3 || len(tmpl.Spec.Volumes) != 6 {
		t.Errorf("mergeDeployment must keep what others added: annotations %v, %d containers, %d volumes",
			tmpl.Annotations, len(tmpl.Spec.Containers), len(tmpl.Spec.Volumes))
	}
	if ptr.Deref(tmpl.Spec.SecurityContext.FSGroup, 0) != 2000 {
		t.Errorf("mergeDeployment must keep the pod security context fields others set: %+v", tmpl.Spec.SecurityContext)
	}
}

func TestMergeService(t *testing.T) {
	cases := map[string]struct {
		reason       string
		from, to     corev1.ServiceType
		wantNodePort int32
	}{
		"KeepNodePort": {
			reason: "An allocated node port survives an update.",
			from:   corev1.ServiceTypeNodePort, to: corev1.ServiceTypeLoadBalancer, wantNodePort: 31000,
		},
		"ToClusterIP": {
			reason: "A ClusterIP Service may not keep node ports.",
			from:   corev1.ServiceTypeLoadBalancer, to: corev1.ServiceTypeClusterIP,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := mustBuild(t, desired(withServiceType(tc.from))).service
			got.Spec.ClusterIP = "10.96.0.10"
			got.Spec.Ports[0].NodePort = 31000
			got.Spec.HealthCheckNodePort = 32000
			want := mustBuild(t, desired(withServiceType(tc.to))).service
			mergeService(want, got)
			if diff := diffService(want, got); diff != nil {
				t.Errorf("%s\nafter mergeService, diffService(...) = %v, want none", tc.reason, diff)
			}
			if got.Spec.ClusterIP != "10.96.0.10" || got.Spec.Ports[0].NodePort != tc.wantNodePort {
				t.Errorf("%s\nclusterIP %q nodePort %d, want 10.96.0.10 and %d", tc.reason, got.Spec.ClusterIP, got.Spec.Ports[0].NodePort, tc.wantNodePort)
			}
		})
	}
}

// BenchmarkCompareUnchanged is the comparison of a steady poll: every live
// object as the builders made it.
func BenchmarkCompareUnchanged(b *testing.B) {
	d := desired()
	o, err := build(d, nil)
	if err != nil {
		b.Fatal(err)
	}
	l := live{deployment: o.deployment.DeepCopy(), configMap: o.configMap.DeepCopy(), secret: o.secret.DeepCopy(), service: o.service.DeepCopy()}
	v := squid.NewVerifier()
	for b.Loop() {
		_ = compare(v, o, l, d)
	}
}

// TestSameSecurity holds samePodSecurity and sameSecurity to every field
// ownedPodSecurity and ownedSecurity keep: a field kept but not compared
// would let drift of it pass unseen.
func TestSameSecurity(t *testing.T) {
	pod := &corev1.PodSecurityContext{
		RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1), RunAsGroup: ptr.To[int64](2),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		FSGroup:        ptr.To[int64](3),
	}
	ctr := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ProcMount:    ptr.To(corev1.DefaultProcMount),
	}
	if !samePodSecurity(pod, pod.DeepCopy()) || !sameSecurity(ctr, ctr.DeepCopy()) {
		t.Fatal("a security context differs from its copy")
	}
	owned := ownedPodSecurity(pod)
	forEachSetField(t, &owned, func(name string, without *corev1.PodSecurityContext) {
		if samePodSecurity(pod, without) {
			t.Errorf("samePodSecurity(...): a pod security context without %s is the same, want different", name)
		}
	})
	ownedCtr := ownedSecurity(ctr)
	forEachSetField(t, &ownedCtr, func(name string, without *corev1.SecurityContext) {
		if sameSecurity(ctr, without) {
			t.Errorf("sameSecurity(...): a security context without %s is the same, want different", name)
		}
	})
}

// forEachSetField calls fn with a copy of *v without each of its set
// fields in turn; it fails when none is set.
func forEachSetField[T any](t *testing.T, v *T, fn func(name string, without *T)) {
	t.Helper()
	rv := reflect.ValueOf(v).Elem()
	set := 0
	for i := range rv.NumField() {
		if rv.Field(i).IsZero() {
			continue
		}
		set++
		without := *v
		reflect.ValueOf(&without).Elem().Field(i).SetZero()
		fn(rv.Type().Field(i).Name, &without)
	}
	if set == 0 {
		t.Fatalf("%T has no field set", *v)
	}
}
