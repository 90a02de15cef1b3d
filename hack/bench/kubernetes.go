/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubev1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	kubernetesbackend "github.com/egressproxy/provider-egressproxy/internal/backend/kubernetes"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

const (
	// baselineNamespace is where the baseline puts its objects; the
	// provider's go to cluster.ProxyNamespace.
	baselineNamespace = "bench-baseline"
	// podsPerNode leaves room under kwok's 110 pods per fake node.
	podsPerNode = 100
	proxyImage  = "docker.io/ubuntu/squid:5.2-22.04_beta"
	serviceCIDR = "10.96.0.0/16"

	targetCluster = "target cluster"

	errBaselineClient = "cannot create the baseline client"
	errUnknownKind    = "the baseline has no object of this kind"
	controlPlane      = "control plane"
)

var _ = registerBench(cluster.BackendKubernetes, func() bench { return &kubeBench{} })

// kubeBench runs KubernetesProxy against the control plane itself as the
// target cluster, with kube-controller-manager, kube-scheduler and kwok's
// fake nodes so that Deployments become available.
type kubeBench struct {
	c      *cluster.Cluster
	target *rest.Config
	// relay stands between the provider and the target cluster with
	// -faults, to take the target apiserver down.
	relay *relay
}

func (k *kubeBench) gvk() schema.GroupVersionKind {
	return kubev1alpha1.SchemeGroupVersion.WithKind("KubernetesProxy")
}

func (k *kubeBench) start(ctx context.Context, r *runner) (*env, error) {
	// One replica per proxy (no PodDisruptionBudget): the provider's, the
	// peer's and the baselines' pods, on enough fake nodes.
	if kube.BinDir() == "" || toolCached("kube-controller-manager") == "" || toolCached("kube-scheduler") == "" || toolCached("kwok") == "" {
		return nil, errors.Wrap(errMissing, "kube-apiserver, etcd, kube-controller-manager, kube-scheduler or kwok is not built (hack/tools.sh build)")
	}
	c, err := cluster.StartBare(ctx, cluster.Options{Dir: r.dir, Nodes: 4*r.o.n/podsPerNode + 1, Logf: logf})
	if err != nil {
		return nil, err
	}
	k.c = c
	// The target cluster is the same apiserver by another name, so the
	// provider's client metrics (by host) tell its requests apart.
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		return nil, errors.Wrap(err, "cannot parse the apiserver's URL")
	}
	cp := u.Host
	u.Host = "localhost:" + u.Port()
	k.target = rest.CopyConfig(c.Config)
	k.target.Host = u.String()
	provider := k.target
	if r.o.faults {
		// Only the provider's target reads go through the relay; the
		// baseline's do not.
		if k.relay, err = newRelay(cp); err != nil {
			return nil, err
		}
		u.Host = "localhost:" + k.relay.port()
		provider = rest.CopyConfig(k.target)
		provider.Host = u.String()
	}
	kc := filepath.Join(r.dir, "target-kubeconfig")
	if err := kube.WriteKubeconfig(provider, kc); err != nil {
		return nil, errors.Wrap(err, "cannot write the target kubeconfig")
	}
	data, err := os.ReadFile(kc) //nolint:gosec // Written above.
	if err != nil {
		return nil, errors.Wrap(err, "cannot read the target kubeconfig")
	}
	if err := addServiceCIDR(ctx, c.Client); err != nil {
		return nil, err
	}
	for _, ns := range []string{cluster.CrossplaneNamespace, cluster.ProxyNamespace, baselineNamespace, ssaNamespace} {
		if err := ensureNamespace(ctx, c.Client, ns); err != nil {
			return nil, err
		}
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.CrossplaneNamespace, Name: cluster.KubeconfigSecret},
		Data:       map[string][]byte{"kubeconfig": data},
	}
	if err := c.Client.Create(ctx, s); err != nil {
		return nil, errors.Wrap(err, "cannot create the kubeconfig Secret")
	}
	pc := cluster.KubernetesProviderConfig("ClusterProviderConfig", "", cluster.ProviderConfigName, cluster.CrossplaneNamespace)
	if err := cluster.Apply(ctx, c.Client, pc); err != nil {
		return nil, err
	}
	return &env{
		cfg: c.Config, client: c.Client, kubeconfig: c.Kubeconfig,
		hosts: map[string]string{cp: controlPlane, u.Host: targetCluster},
	}, nil
}

// addServiceCIDR adds a /16 of Service IPs: envtest's apiserver has a /24,
// which the provider's and the baseline's Services fill at N=200.
// kube-controller-manager makes it Ready, and only then is it used.
func addServiceCIDR(ctx context.Context, c client.Client) error {
	sc := &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{serviceCIDR}},
	}
	if err := client.IgnoreAlreadyExists(c.Create(ctx, sc)); err != nil {
		return errors.Wrap(err, "cannot add a ServiceCIDR")
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(sc), sc); err == nil &&
			meta.IsStatusConditionTrue(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return errors.New("the ServiceCIDR did not become Ready")
}

func (k *kubeBench) stop() {
	if k.relay != nil {
		_ = k.relay.down()
	}
	if k.c != nil {
		k.c.Stop()
	}
}

func (k *kubeBench) mr(i int) *unstructured.Unstructured {
	name := fmt.Sprintf("bench-%04d", i)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kubev1alpha1.SchemeGroupVersion.String(),
		"kind":       "KubernetesProxy",
		"metadata":   map[string]any{"name": name, "namespace": mrNamespace},
		"spec": map[string]any{
			"forProvider": map[string]any{
				"namespace":           cluster.ProxyNamespace,
				"replicas":            int64(1),
				"allowedClientCIDRs":  []any{"10.0.0.0/8"},
				"allowedDestinations": []any{"api.example.com", ".example.org"},
				"nodeSelector":        map[string]any{cluster.LabelEgressNode: "true"},
			},
			"providerConfigRef":          map[string]any{"kind": "ClusterProviderConfig", "name": cluster.ProviderConfigName},
			"writeConnectionSecretToRef": map[string]any{"name": name + "-proxy"},
		},
	}}
}

func (k *kubeBench) backendCounts() counts { return nil }

// baseline creates, per MR, what a plain program composing the proxy would:
// a ConfigMap, a Secret, a Deployment and a Service, with client-go, at the
// provider's concurrency and client rate limit. Then the same again with
// server-side apply (ssaBaseline), and the writes of the managed
// reconciler's contract (contractBaseline).
func (k *kubeBench) baseline(ctx context.Context, r *runner) (*baselineResult, error) {
	cnt := &counter{}
	cs, err := kubernetes.NewForConfig(countedConfig(k.target, r.o.rate, cnt))
	if err != nil {
		return nil, errors.Wrap(err, errBaselineClient)
	}
	// Polls for availability are the bench's, not the baseline's: uncounted.
	watcher, err := kubernetes.NewForConfig(k.target)
	if err != nil {
		return nil, errors.Wrap(err, errBaselineClient)
	}
	res := &baselineResult{
		what:       "client-go creates a ConfigMap (squid.conf), a Secret (htpasswd), a Deployment (1 replica) and a Service per MR, " + fmt.Sprint(r.o.rate) + " at a time",
		readyMeans: "every Deployment available",
	}
	// Built before the clock starts, as the server-side apply baseline's.
	objs := make([][]client.Object, r.o.n)
	for i := range objs {
		objs[i] = kubeObjects(baselineNamespace, fmt.Sprintf("base-%04d", i))
	}
	api0, cpu0, t0 := markAPIServer(), selfCPU(), time.Now()
	err = parallel(ctx, r.o.n, r.o.rate, func(ctx context.Context, i int) error {
		return createKubeObjects(ctx, cs, objs[i])
	})
	if err != nil {
		return res, err
	}
	res.exist, res.cpuExist, res.apiExist = time.Since(t0), selfCPU()-cpu0, markAPIServer().since(api0)
	if err := waitAvailable(ctx, watcher, baselineNamespace, r.o.n, r.o.timeout); err != nil {
		res.requests = cnt.snapshot()
		return res, err
	}
	res.ready, res.cpu, res.requests = time.Since(t0), selfCPU()-cpu0, cnt.snapshot()
	res.apiReady = markAPIServer().since(api0)
	// The contract baseline is the floor all Synced is judged against: a
	// failed server-side apply baseline (an API server timeout under load)
	// must not cost it.
	res.ssa, err = k.ssaBaseline(ctx, r, watcher)
	ssaErr := errors.Wrap(err, "server-side apply baseline")
	if ctx.Err() != nil {
		return res, ssaErr
	}
	res.contract, err = k.contractBaseline(ctx, r)
	return res, errors.Join(ssaErr, errors.Wrap(err, "contract baseline"))
}

// countedConfig is cfg with the provider's client rate limit for rate
// reconciles per second, counting every request in cnt as the target
// cluster's.
func countedConfig(cfg *rest.Config, rate int, cnt *counter) *rest.Config {
	return countedConfigAs(cfg, rate, cnt, targetCluster)
}

// countedConfigAs is countedConfig, counting requests as target's.
func countedConfigAs(cfg *rest.Config, rate int, cnt *counter, target string) *rest.Config {
	out := ratelimiter.LimitRESTConfig(cfg, rate)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			cnt.inc(target, req.Method)
			return rt.RoundTrip(req)
		})
	})
	return out
}

// waitAvailable polls, every second, until n Deployments of ns are
// available.
func waitAvailable(ctx context.Context, cs kubernetes.Interface, ns string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		l, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err == nil && available(l.Items) == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return errors.New("the baseline's Deployments did not become available")
}

func available(ds []appsv1.Deployment) int {
	n := 0
	for _, d := range ds {
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue && d.Status.AvailableReplicas > 0 {
				n++
			}
		}
	}
	return n
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// baselineSquidConf is about the size of the configuration the provider
// renders: the baseline writes the same amount of data.
const baselineSquidConf = `http_port 3128
pid_filename /run/squid.pid
coredump_dir /var/spool/squid
access_log stdio:/var/log/squid/access.log
cache_log /var/log/squid/cache.log
cache deny all
auth_param basic program /usr/lib/squid/basic_ncsa_auth /etc/squid/egressproxy/htpasswd
auth_param basic realm egressproxy
acl authenticated proxy_auth REQUIRED
acl clients src 10.0.0.0/8
acl destinations dstdomain api.example.com .example.org
acl SSL_ports port 443
acl CONNECT method CONNECT
http_access deny !clients
http_access deny !authenticated
http_access deny CONNECT !SSL_ports
http_access allow destinations
http_access deny all
`

// baselineHtpasswd is one bcrypt line, made once: a plain program gets the
// hash from its input and does not hash per object.
const baselineHtpasswd = "egressproxy:$2y$10$5a1Cwq0YQJkcCvE2y0xO8uC2g9cyd0pJ2r2t1oQpX2fQ4XzN3N7cS\n"

// kubeObjects are the four objects of baseline proxy name in ns, built once
// and then created or applied.
func kubeObjects(ns, name string) []client.Object {
	labels := map[string]string{"app.kubernetes.io/name": "egressproxy", "app.kubernetes.io/instance": name}
	meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	d := &appsv1.Deployment{
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{cluster.LabelEgressNode: "true"},
					Containers: []corev1.Container{{
						Name: "squid", Image: proxyImage,
						Ports: []corev1.ContainerPort{{Name: "proxy", ContainerPort: 3128}},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "config", MountPath: "/etc/squid/squid.conf", SubPath: "squid.conf"},
							{Name: "htpasswd", MountPath: "/etc/squid/egressproxy"},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}},
						{Name: "htpasswd", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}},
					},
				},
			},
		},
	}
	svc := &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
		Selector: labels,
		// targetPort is what the apiserver defaults it to; explicit, or the
		// apply configuration would hold its zero value.
		Ports: []corev1.ServicePort{{Name: "proxy", Port: 3128, TargetPort: intstr.FromInt32(3128)}},
	}}
	return []client.Object{
		&corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"squid.conf": baselineSquidConf}},
		&corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{"htpasswd": []byte(baselineHtpasswd)}},
		d,
		svc,
	}
}

// createKubeObjects POSTs objs, in order, with the typed client.
func createKubeObjects(ctx context.Context, cs kubernetes.Interface, objs []client.Object) error {
	for _, o := range objs {
		if err := createKubeObject(ctx, cs, o); err != nil {
			return err
		}
	}
	return nil
}

func createKubeObject(ctx context.Context, cs kubernetes.Interface, o client.Object) error {
	var err error
	ns, opts := o.GetNamespace(), metav1.CreateOptions{}
	switch o := o.(type) {
	case *corev1.ConfigMap:
		_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, o, opts)
		return errors.Wrap(err, "cannot create a ConfigMap")
	case *corev1.Secret:
		_, err = cs.CoreV1().Secrets(ns).Create(ctx, o, opts)
		return errors.Wrap(err, "cannot create a Secret")
	case *appsv1.Deployment:
		_, err = cs.AppsV1().Deployments(ns).Create(ctx, o, opts)
		return errors.Wrap(err, "cannot create a Deployment")
	case *corev1.Service:
		_, err = cs.CoreV1().Services(ns).Create(ctx, o, opts)
		return errors.Wrap(err, "cannot create a Service")
	}
	return errors.New(errUnknownKind)
}

// faults: the target apiserver down for -fault-for (connections refused and
// cut), the control plane up.
func (k *kubeBench) faults() []fault {
	if k.relay == nil {
		return nil
	}
	return []fault{{name: "target apiserver down", target: targetCluster, begin: k.relay.down, end: k.relay.up}}
}

// dataPlane: the pod's squid writes its access log to a FIFO that
// squid.TrafficAWK copies to the pod's log; squid runs with -N (the
// container's start script). Issue 40's goal: at most 2 ms added p99.
func (*kubeBench) dataPlane() dataPlane {
	return dataPlane{config: kubernetesbackend.DataPlaneConfig, accessLog: accessLogFIFO, args: []string{"-N"}, goalAddedP99: 2 * time.Millisecond}
}
