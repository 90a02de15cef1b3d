/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	kubeenv "github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
	nodeenv "github.com/egressproxy/provider-egressproxy/internal/testenv/node"
)

// originPort is where the origin server listens, on the node's bridge
// address inside the node's own network namespace.
const originPort = 8080

// TestIntegrationRealNodeServesTraffic runs a proxy on a real node: a
// kubelet and containerd run the squid image built from Debian's package
// with the backend's own Deployment, readiness probe and security context,
// and a client in the node's network namespace sends requests through it.
func TestIntegrationRealNodeServesTraffic(t *testing.T) {
	kubelet := testenv.Tool(t, "kubelet")
	kcm := testenv.Tool(t, "kube-controller-manager")
	images := nodeenv.FindImages(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	// The node runs etcd and kube-apiserver in its network namespace, so
	// the apiserver reaches the kubelet (pods/log) as on a real cluster.
	start := time.Now()
	n := nodeenv.Start(t, nodeenv.Config{Name: "egressproxy-node", Kubelet: kubelet, Images: images,
		ControlPlane: nodeenv.ControlPlaneBinaries{Etcd: testenv.Tool(t, "etcd"), APIServer: testenv.Tool(t, "kube-apiserver")}})
	env, err := kubeenv.ForConfig(n.ControlPlane.Config, n.ControlPlane.Kubeconfig)
	step(t, "client of the node's apiserver", err)
	startKCM(t, kcm, env.Kubeconfig)
	waitNodeReady(ctx, t, env.Client, n)
	t.Logf("node Ready %s after start", time.Since(start).Round(time.Millisecond))
	// No kube-scheduler: the test binds the pods to the only node.
	go bindPods(ctx, env.Client, n.Name)

	ns := env.Namespace(t, "realnode")
	// The ServiceAccount admission needs it; no controller makes it here.
	step(t, "create ServiceAccount", env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}))
	b, err := NewForConfig(env.Config)
	step(t, "NewForConfig", err)
	t.Cleanup(func() { _ = b.Close() })

	origin := serveOrigin(t, n)
	d := desired(inNamespace(ns), withReplicas(1), withImage(images.Squid), func(d *backend.Desired[Params]) {
		d.Proxy.AllowedClientCIDRs = []string{"10.88.0.0/16"}
		// The origin is on a private address: the node's bridge.
		d.Proxy.AllowedDestinations = []string{nodeenv.BridgeIP + "/32"}
		d.Proxy.AllowedHTTPPorts = []int32{originPort}
		d.Proxy.DenyPrivateDestinations = ptr.To(false)
	})
	created := time.Now()
	step(t, "Create", b.Create(ctx, d))
	o := waitReady(ctx, t, b, d, n)
	t.Logf("Deployment available and Observe Ready %s after Create: %q", time.Since(created).Round(time.Millisecond), o.Message)

	podIP := proxyPodIP(ctx, t, env.Client, ns)
	// The pod's network namespace is a file in the node's own folder, which
	// the node removes when it stops: none is left in the host's /run/netns.
	if files, err := n.PodNetNS(); err != nil || len(files) == 0 {
		t.Errorf("the node's pods' network namespaces: want at least one in the node's folder, got %v, %v", files, err)
	}
	cases := map[string]struct {
		reason string
		user   *url.Userinfo
		target string
		want   int
	}{
		"Allowed": {
			reason: "An allowed destination is forwarded to the origin.",
			user:   url.UserPassword(testUser, testPassword),
			target: origin,
			want:   http.StatusOK,
		},
		"NotAllowed": {
			reason: "A destination not on the allowlist is refused.",
			user:   url.UserPassword(testUser, testPassword),
			target: fmt.Sprintf("http://10.88.0.2:%d/", originPort),
			want:   http.StatusForbidden,
		},
		"NoCredentials": {
			reason: "A request without credentials must authenticate first.",
			target: origin,
			want:   http.StatusProxyAuthRequired,
		},
		"WrongPassword": {
			reason: "A wrong password must authenticate again.",
			user:   url.UserPassword(testUser, "wrong"),
			target: origin,
			want:   http.StatusProxyAuthRequired,
		},
	}
	t.Run("CrashLoopBackOff", func(t *testing.T) { crashLoop(ctx, t, env, b, images.Pause, n) })
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			proxy := &url.URL{Scheme: "http", Host: net.JoinHostPort(podIP, "3128"), User: tc.user}
			c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxy), DialContext: n.DialContext}}
			resp, err := c.Get(tc.target)
			if err != nil {
				t.Fatalf("%s\nGET %s through %s: %v", tc.reason, tc.target, podIP, err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s\nGET %s: status %d, want %d; body %.200s", tc.reason, tc.target, resp.StatusCode, tc.want, body)
			}
			if tc.want == http.StatusOK && string(body) != "origin\n" {
				t.Errorf("%s\nGET %s: body %q, want the origin's", tc.reason, tc.target, body)
			}
		})
	}
	// The pod's traffic container prints what squid counted, and Observe
	// reads it through pods/log.
	t.Run("Traffic", func(t *testing.T) {
		b.trafficTTL = 0
		want := squid.Traffic{Allowed: 1, DeniedDestination: 1, DeniedAuth: 2}
		var got *squid.Traffic
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
			o, err := b.Observe(ctx, d)
			step(t, "Observe", err)
			if got = o.Traffic; got != nil && got.Allowed+got.DeniedDestination+got.DeniedAuth+got.DeniedClient >= 4 {
				break
			}
		}
		if got == nil || got.BytesToClients == 0 || got.BytesFromClients == 0 {
			pods, err := b.podsOf(ctx, ns, d.Name)
			step(t, "list pods", err)
			for _, p := range pods {
				line, err := b.logs.lastLine(ctx, ns, p.Name, trafficName)
				t.Logf("pod %s (ready %v): traffic container's last line %q, %v", p.Name, podReady(p), line, err)
			}
			t.Fatalf("Observe reports traffic %+v, want the requests' counts and bytes", got)
		}
		counts := *got
		counts.BytesToClients, counts.BytesFromClients = 0, 0
		if diff := cmp.Diff(want, counts); diff != "" {
			t.Errorf("Observe(...).Traffic: -want, +got:\n%s", diff)
		}
	})
}

// serveOrigin serves "origin" on the node's bridge address, inside the
// node's network namespace, and returns its URL.
func serveOrigin(t *testing.T, n *nodeenv.Node) string {
	t.Helper()
	l, err := n.Listen(net.JoinHostPort(nodeenv.BridgeIP, strconv.Itoa(originPort)))
	step(t, "listen in the node's namespace", err)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "origin\n")
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String() + "/"
}

// startKCM runs the Deployment and ReplicaSet controllers.
func startKCM(t *testing.T, bin, kubeconfig string) {
	t.Helper()
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "kcm.log"))
	step(t, "create kcm log", err)
	c := exec.Command(bin, "--kubeconfig="+kubeconfig, "--leader-elect=false", "--secure-port=0", //nolint:gosec // Test harness.
		"--controllers=deployment,replicaset",
		// Without it, it creates /usr/libexec/kubernetes/... on the host.
		"--flex-volume-plugin-dir="+filepath.Join(dir, "flexvolume"))
	c.Stdout, c.Stderr = log, log
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	step(t, "start kube-controller-manager", c.Start())
	t.Cleanup(func() {
		_ = c.Process.Signal(syscall.SIGTERM)
		_ = c.Wait()
		_ = log.Close()
	})
}

// bindPods binds every pending pod to the node until ctx ends.
func bindPods(ctx context.Context, c client.Client, nodeName string) {
	for ctx.Err() == nil {
		pods := &corev1.PodList{}
		if c.List(ctx, pods) == nil {
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
					continue
				}
				_ = c.SubResource("binding").Create(ctx, p, &corev1.Binding{
					ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
					Target:     corev1.ObjectReference{Kind: "Node", Name: nodeName},
				})
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func waitNodeReady(ctx context.Context, t *testing.T, c client.Client, n *nodeenv.Node) {
	t.Helper()
	for {
		nd := &corev1.Node{}
		if c.Get(ctx, client.ObjectKey{Name: n.Name}, nd) == nil {
			for _, cond := range nd.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node %s is not Ready: %v\nkubelet:\n%s\ncontainerd:\n%s", n.Name, ctx.Err(), n.Log("kubelet", 40), n.Log("containerd", 20))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func waitReady(ctx context.Context, t *testing.T, b *Backend, d backend.Desired[Params], n *nodeenv.Node) backend.Observation[Observation] {
	t.Helper()
	var last string
	for {
		o, err := b.Observe(ctx, d)
		if err == nil && o.Ready {
			return o
		}
		if err == nil {
			last = o.Message
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the proxy is not Ready: %v; last message %q\nkubelet:\n%s", ctx.Err(), last, n.Log("kubelet", 60))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// proxyPodIP returns the address of the proxy's ready pod.
func proxyPodIP(ctx context.Context, t *testing.T, c client.Client, ns string) string {
	t.Helper()
	pods := &corev1.PodList{}
	step(t, "list pods", c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(selector(testName))))
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			return p.Status.PodIP
		}
	}
	t.Fatalf("no proxy pod has an address")
	return ""
}

// crashLoop runs a proxy on an image without /bin/sh (the pause image): the
// container cannot start, and Observe must say so rather than only count
// unavailable replicas.
func crashLoop(ctx context.Context, t *testing.T, env *kubeenv.Env, b *Backend, image string, n *nodeenv.Node) {
	ns := env.Namespace(t, "crashloop")
	step(t, "create ServiceAccount", env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}))
	d := desired(inNamespace(ns), withReplicas(1), withImage(image))
	step(t, "Create", b.Create(ctx, d))
	var last string
	for {
		o, err := b.Observe(ctx, d)
		step(t, "Observe", err)
		if o.Ready {
			t.Fatalf("a proxy whose container cannot start is Ready: %q", o.Message)
		}
		if last = o.Message; strings.Contains(last, "CrashLoopBackOff") {
			t.Logf("Observe message: %q", last)
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Observe never named the crash; last message %q\nkubelet:\n%s", last, n.Log("kubelet", 30))
		case <-time.After(500 * time.Millisecond):
		}
	}
	step(t, "Delete", b.Delete(ctx, d))
}
