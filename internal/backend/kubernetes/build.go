/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// Defaults of the parameters, the same as the API defaults, for objects no
// API server defaulted.
const (
	DefaultReplicas = v1alpha1.DefaultReplicas
	DefaultImage    = v1alpha1.DefaultImage
)

// Labels and annotations on the objects of an instance.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"

	// AnnotationConfigChecksum on the pod template rolls the pods when the
	// squid configuration changes.
	AnnotationConfigChecksum = "egressproxy.io/config-checksum"
	// AnnotationHtpasswdChecksum on the pod template rolls the pods when
	// the credentials change: the kubelet updates a mounted Secret only
	// after a minute or more, and a rotation must be in force in seconds.
	// It is the SHA-256 of the bcrypt file, which tells nothing of the
	// password.
	AnnotationHtpasswdChecksum = "egressproxy.io/htpasswd-checksum"

	appName   = "egressproxy"
	component = "proxy"
)

// Names inside the objects.
const (
	keySquidConf   = "squid.conf"
	keyHtpasswd    = "htpasswd"
	containerName  = "squid"
	trafficName    = "traffic"
	portName       = "proxy"
	volumeConfig   = "config"
	volumeHtpasswd = "htpasswd"
	volumeRun      = "run"
	volumeSpool    = "spool"
	volumeLogs     = "logs"
	squidConfPath  = "/etc/squid/squid.conf"
	htpasswdDir    = "/etc/squid/egressproxy"
	squidBinary    = "/usr/sbin/squid"
	shell          = "/bin/sh"
)

// The only folders the proxy container writes to, each an emptyDir: the root
// file system is read-only. They are where Debian's and Ubuntu's squid
// package puts things, so the image needs no set-up.
const (
	runDir   = "/run"             // pid_filename
	spoolDir = "/var/spool/squid" // coredump_dir, squid's working folder
	logDir   = "/var/log/squid"   // the log FIFOs, see startScript
	pidFile  = runDir + "/squid.pid"
	// accessLog and cacheLog are FIFOs that the container's shell copies to
	// its stdout and stderr.
	accessLog = logDir + "/access.log"
	cacheLog  = logDir + "/cache.log"
	// trafficFile holds the counts squid.TrafficAWK keeps, which the
	// traffic container prints for the provider to read (traffic.go).
	trafficFile = logDir + "/traffic"
)

// How a pod hands over to its replacement without refusing a connection or
// cutting a tunnel (docs/backends.md): the new pods all start at once
// (maxSurge 100%) and become ready within a probe period or two; an old pod
// that is told to stop first waits preStopSleep, in which the endpoints
// controller takes it out of the Service, then squid stops accepting and
// lets open requests and tunnels finish for shutdownLifetime; the kubelet
// kills what is left after terminationGrace.
const (
	preStopSleep     = 5
	shutdownLifetime = 30 * time.Second
	terminationGrace = 45
	// trafficEvery is how often the traffic container prints the counts;
	// the provider reads them at most every defaultTrafficTTL (traffic.go).
	trafficEvery = 10
)

// The proxy runs as user and group proxy of Debian and Ubuntu, which own
// squid's folders in the package; a numeric ID lets the kubelet check
// runAsNonRoot without reading the image's /etc/passwd.
const (
	proxyUID = 13
	proxyGID = 13
)

const errRender = "the proxy parameters cannot be turned into a squid configuration"

// objects are the desired objects of one instance.
type objects struct {
	configMap  *corev1.ConfigMap
	secret     *corev1.Secret
	deployment *appsv1.Deployment
	service    *corev1.Service
	// pdb is nil with one replica: a PodDisruptionBudget of minAvailable 1
	// over one pod would block every node drain.
	pdb      *policyv1.PodDisruptionBudget
	checksum string
}

// instance is what the builders need to know about an instance.
type instance struct {
	name      string
	namespace string
	ownership backend.Ownership
	port      int32
	params    Params
	// shared, when set, holds the label maps every object of the
	// instance uses. Only objects built to be compared share them: they
	// are never changed or written (a write's response is decoded into
	// its object), and building the same maps for each object was a
	// tenth of what a steady Observe allocated.
	shared *sharedMaps
}

type sharedMaps struct {
	labels, selector map[string]string
}

func instanceOf(d backend.Desired[Params]) instance {
	port := d.Proxy.Port
	if port == 0 {
		port = backend.DefaultPort
	}
	return instance{name: d.Name, namespace: d.Params.Namespace, ownership: d.Ownership, port: port, params: d.Params}
}

// squidConfig is the squid configuration of d as the container runs it:
// logs to the container's streams, htpasswd at the mounted path.
func squidConfig(d backend.Desired[Params]) squid.Config {
	c := backend.SquidConfig(d)
	c.AccessLog = accessLog
	c.CacheLog = cacheLog
	c.PIDFile = pidFile
	c.CoredumpDir = spoolDir
	c.HtpasswdPath = htpasswdDir + "/" + keyHtpasswd
	c.ShutdownLifetime = shutdownLifetime
	return c
}

// build returns the desired objects of d. htpasswd is the file to store: the
// existing one when it still matches the password, so its salt is kept.
func build(d backend.Desired[Params], htpasswd []byte) (objects, error) {
	conf, err := squid.Render(squidConfig(d))
	if err != nil {
		return objects{}, backend.Permanent(errors.Wrap(err, errRender))
	}
	return assemble(instanceOf(d), d, conf, htpasswd, squid.Checksum(conf), htpasswdSum(htpasswd)), nil
}

// htpasswdSum is the pod template's AnnotationHtpasswdChecksum of an
// htpasswd file.
func htpasswdSum(htpasswd []byte) string {
	if len(htpasswd) == 0 {
		return ""
	}
	return squid.Checksum(htpasswd)
}

// buildToCompare returns the desired objects of d to compare the live ones
// with: the configuration is not rendered when sums knows its checksum, and
// the ConfigMap holds no data (diffConfigMap compares by checksum).
// htpasswd is the live Secret's file: the pods must run the one stored,
// and diffSecret tells whether that one accepts the credentials.
func buildToCompare(sums *squid.Sums, d backend.Desired[Params], htpasswd []byte) (objects, error) {
	sum, err := sums.Sum(squidConfig(d))
	if err != nil {
		return objects{}, backend.Permanent(errors.Wrap(err, errRender))
	}
	in := instanceOf(d)
	in.shared = &sharedMaps{labels: in.labels(), selector: in.selector()}
	return assemble(in, d, nil, nil, sum, htpasswdSum(htpasswd)), nil
}

// assemble returns the objects of d, whose instance is in, with the squid
// configuration conf, whose checksum is sum, and the htpasswd file whose
// checksum is pwSum; a nil conf leaves the ConfigMap's data out.
func assemble(in instance, d backend.Desired[Params], conf, htpasswd []byte, sum, pwSum string) objects {
	o := objects{
		configMap:  buildConfigMap(in, conf),
		secret:     buildSecret(in, htpasswd),
		deployment: buildDeployment(in, sum, pwSum),
		service:    buildService(in),
		checksum:   sum,
	}
	if replicas(d.Params) > 1 {
		o.pdb = buildPDB(in)
	}
	return o
}

func replicas(p Params) int32 { return ptr.Deref(p.Replicas, DefaultReplicas) }

func image(p Params) string { return ptr.Deref(p.Image, DefaultImage) }

func serviceType(p Params) corev1.ServiceType {
	return ptr.Deref(p.ServiceType, corev1.ServiceTypeClusterIP)
}

// selector selects the pods of one instance; it is immutable in a
// Deployment, so it holds nothing that could ever change.
func selector(name string) map[string]string {
	return map[string]string{LabelName: appName, LabelInstance: name}
}

// selector is selector(in.name), shared when in's objects share maps.
func (in instance) selector() map[string]string {
	if in.shared != nil {
		return in.shared.selector
	}
	return selector(in.name)
}

// labels are the labels of every object of an instance.
func (in instance) labels() map[string]string {
	if in.shared != nil {
		return in.shared.labels
	}
	l := in.ownership.Labels(backend.KubernetesLabelKeys)
	maps.Copy(l, selector(in.name))
	l[LabelComponent] = component
	l[LabelManagedBy] = backend.ManagedByValue
	return l
}

func (in instance) meta() metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: in.name, Namespace: in.namespace, Labels: in.labels()}
}

func buildConfigMap(in instance, conf []byte) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: in.meta()}
	if conf != nil {
		cm.Data = map[string]string{keySquidConf: string(conf)}
	}
	return cm
}

func buildSecret(in instance, htpasswd []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: in.meta(),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{keyHtpasswd: htpasswd},
	}
}

func buildDeployment(in instance, checksum, pwSum string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: in.meta(),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas(in.params)),
			Selector: &metav1.LabelSelector{MatchLabels: in.selector()},
			// A configuration change starts every new pod at once and
			// stops an old one only when a new one is ready: the proxy
			// never has fewer ready pods than the spec, and the change is
			// in force after one pod start, not one per replica.
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr.To(intstr.FromInt32(0)),
					MaxSurge:       ptr.To(intstr.FromString("100%")),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: in.labels(),
					Annotations: map[string]string{
						AnnotationConfigChecksum:   checksum,
						AnnotationHtpasswdChecksum: pwSum,
					},
				},
				Spec: buildPodSpec(in),
			},
		},
	}
}

// startScript starts squid in the container. squid opens its logs by name,
// and the container's stdout and stderr are pipes that the runtime may own as
// root (containerd before 2.0 does), which user proxy may not open as
// /dev/stdout. So the log files are FIFOs of the proxy's own, which cat
// copies to the inherited streams; the access log goes through
// squid.TrafficAWK, which copies it and keeps the counts in trafficFile.
// The program is inline (it has no single quote), so a new one changes the
// command and rolls the pods. exec keeps squid the container's main
// process, so it gets the kubelet's SIGTERM and shuts down cleanly.
func startScript() string {
	return strings.Join([]string{
		"set -e",
		"rm -f " + accessLog + " " + cacheLog,
		"mkfifo -m 600 " + accessLog + " " + cacheLog,
		"awk " + squid.AWKLineByLine + " -v out=" + trafficFile + " '" + squid.TrafficAWK + "' <" + accessLog + " &",
		"cat " + cacheLog + " >&2 &",
		"exec " + squidBinary + " -N -f " + squidConfPath,
	}, "\n")
}

// trafficScript prints the last counts every trafficEvery seconds, for the
// provider to read as the container's last log line (traffic.go). A
// SIGTERM ends it at once: as PID 1 without a trap, sh would ignore it and
// hold the old pod for the whole grace period.
func trafficScript() string {
	return strings.Join([]string{
		`trap "exit 0" TERM`,
		"while :; do",
		"  cat " + trafficFile + " 2>/dev/null || echo",
		"  sleep " + strconv.Itoa(trafficEvery) + " & wait $!",
		"done",
	}, "\n")
}

// podSecurityContext and containerSecurityContext meet the Pod Security
// "restricted" profile, so the proxy runs in namespaces that enforce it:
// a tenant's proxy is an internet-facing process, and must hold nothing a
// compromise could use against the cluster.
func podSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](proxyUID),
		RunAsGroup:     ptr.To[int64](proxyGID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func containerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func buildPodSpec(in instance) corev1.PodSpec {
	emptyDir := func(name string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	}
	return corev1.PodSpec{
		Containers:                    []corev1.Container{buildContainer(in), buildTrafficContainer(in)},
		TerminationGracePeriodSeconds: ptr.To[int64](terminationGrace),
		// squid needs no Kubernetes API: a token in the pod would only be
		// something to steal.
		AutomountServiceAccountToken: ptr.To(false),
		SecurityContext:              podSecurityContext(),
		NodeSelector:                 in.params.NodeSelector,
		Tolerations:                  in.params.Tolerations,
		// Spread the replicas over nodes: one node going away must not take
		// the whole proxy, and each node adds an egress IP.
		Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100,
				PodAffinityTerm: corev1.PodAffinityTerm{
					LabelSelector: &metav1.LabelSelector{MatchLabels: in.selector()},
					TopologyKey:   corev1.LabelHostname,
				},
			}},
		}},
		Volumes: []corev1.Volume{
			{Name: volumeConfig, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: in.name},
				DefaultMode:          ptr.To[int32](0o444),
			}}},
			// Mounted as a folder, not with subPath: the kubelet then
			// updates the file in place when the Secret changes.
			{Name: volumeHtpasswd, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName:  in.name,
				DefaultMode: ptr.To[int32](0o444),
			}}},
			emptyDir(volumeRun),
			emptyDir(volumeSpool),
			emptyDir(volumeLogs),
		},
	}
}

func buildContainer(in instance) corev1.Container {
	probe := func(initialDelay, period int32) *corev1.Probe {
		// Every field is set, so the API server adds no default that would
		// look like drift.
		return &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(in.port)}},
			InitialDelaySeconds: initialDelay,
			PeriodSeconds:       period,
			TimeoutSeconds:      1,
			SuccessThreshold:    1,
			FailureThreshold:    3,
		}
	}
	return corev1.Container{
		Name:            containerName,
		Image:           image(in.params),
		Command:         []string{shell, "-c", startScript()},
		SecurityContext: containerSecurityContext(),
		Ports:           []corev1.ContainerPort{{Name: portName, ContainerPort: in.port, Protocol: corev1.ProtocolTCP}},
		Resources:       resources(in.params.Resources),
		// Probed often, so a new pod takes over a second or two after
		// squid listens (a configuration change waits for it).
		ReadinessProbe: probe(1, 2),
		LivenessProbe:  probe(15, 10),
		// Stay in the Service until the endpoints controller has taken the
		// pod out, so no client is refused (see preStopSleep).
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: preStopSleep}}},
		VolumeMounts: []corev1.VolumeMount{
			// subPath keeps the image's other files in /etc/squid; the
			// checksum annotation rolls the pods when the file changes.
			{Name: volumeConfig, MountPath: squidConfPath, SubPath: keySquidConf, ReadOnly: true},
			{Name: volumeHtpasswd, MountPath: htpasswdDir, ReadOnly: true},
			{Name: volumeRun, MountPath: runDir},
			{Name: volumeSpool, MountPath: spoolDir},
			{Name: volumeLogs, MountPath: logDir},
		},
	}
}

// buildTrafficContainer is the container whose log the provider reads the
// counts from: the squid image's own sh, cat and sleep, so no other image is
// pulled, with the logs folder read-only and a share of a CPU.
func buildTrafficContainer(in instance) corev1.Container {
	return corev1.Container{
		Name:            trafficName,
		Image:           image(in.params),
		Command:         []string{shell, "-c", trafficScript()},
		SecurityContext: containerSecurityContext(),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("4Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: volumeLogs, MountPath: logDir, ReadOnly: true}},
	}
}

// resources returns r with a request for every limit that has none, as the
// API server does for pods, so a limit-only spec compares equal to what the
// cluster reports.
func resources(r *corev1.ResourceRequirements) corev1.ResourceRequirements {
	if r == nil {
		return corev1.ResourceRequirements{}
	}
	out := *r.DeepCopy()
	for k, v := range out.Limits {
		if _, ok := out.Requests[k]; ok {
			continue
		}
		if out.Requests == nil {
			out.Requests = corev1.ResourceList{}
		}
		out.Requests[k] = v.DeepCopy()
	}
	return out
}

func buildService(in instance) *corev1.Service {
	t := serviceType(in.params)
	s := &corev1.Service{
		ObjectMeta: in.meta(),
		Spec: corev1.ServiceSpec{
			Type:     t,
			Selector: in.selector(),
			Ports: []corev1.ServicePort{{
				Name: portName, Port: in.port, TargetPort: intstr.FromInt32(in.port), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
	if t != corev1.ServiceTypeClusterIP {
		// Keep the client's address: squid allows clients by source CIDR,
		// and the Cluster policy would make every client a node address.
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	if t == corev1.ServiceTypeLoadBalancer {
		s.Spec.LoadBalancerIP = ptr.Deref(in.params.LoadBalancerIP, "")
	}
	return s
}

func buildPDB(in instance) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: in.meta(),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: in.selector()},
		},
	}
}
