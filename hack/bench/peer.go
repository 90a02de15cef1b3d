/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

const (
	// peerTool is the peer's name in hack/tools.sh, which builds it and
	// puts its CRDs beside it.
	peerTool = "provider-kubernetes"
	// peerNamespace is where the peer's Objects put their four objects.
	peerNamespace = "bench-peer"
	// peerConfig is the peer's ClusterProviderConfig.
	peerConfig = "bench-peer"
	// peerMetricsPort is controller-runtime v0.19's default metrics port,
	// which the peer has no flag for (nor for its webhook's 9443): it runs
	// in a network namespace of its own, so neither meets another program
	// on this machine.
	peerMetricsPort = 8080

	errPeer = "provider-kubernetes side-by-side"
)

// peerGVK is the peer's namespaced managed resource (v1.x, Crossplane v2).
var peerGVK = schema.GroupVersionKind{Group: "kubernetes.m.crossplane.io", Version: "v1alpha1", Kind: "Object"}

// peerResult is the peer's run: provider-kubernetes making the same four
// objects per proxy, as four Objects.
type peerResult struct {
	version       string
	rate          int
	synced, ready time.Duration
	settled       time.Duration
	cpuSynced     float64
	cpuConverge   float64
	cpuSteady     float64
	steadyPolls   float64
	mem           memKiB
	converge      counts
	steady        counts
	load          string
	note          string
}

// peerVersion is the version hack/tools.sh builds, from the cached path
// (.../provider-kubernetes-v1.2.0/provider-kubernetes).
func peerVersion(bin string) string {
	return strings.TrimPrefix(filepath.Base(filepath.Dir(bin)), peerTool+"-")
}

// peer runs provider-kubernetes against the same API server, with the same
// kubeconfig Secret as its target and the provider's settings (--poll, no
// jitter, --max-reconcile-rate), on the same four objects per proxy as
// Objects, N proxies, and reads the same figures as the provider's run.
func (k *kubeBench) peer(ctx context.Context, r *runner) (*peerResult, error) {
	bin := toolCached(peerTool)
	if bin == "" {
		return nil, errors.Wrap(errMissing, "provider-kubernetes is not built (make bench builds it; hack/tools.sh build provider-kubernetes)")
	}
	res := &peerResult{version: peerVersion(bin), rate: r.o.rate}
	logf("kubernetes: peer %s %s: installing its CRDs", peerTool, res.version)
	crds, err := filepath.Glob(filepath.Join(filepath.Dir(bin), "crds", "kubernetes.m.crossplane.io_*.yaml"))
	if err != nil || len(crds) == 0 {
		return res, errors.Errorf("%s: no CRDs beside %s", errPeer, bin)
	}
	if _, err := envtest.InstallCRDs(k.c.Config, envtest.CRDInstallOptions{Paths: crds, MaxTime: time.Minute}); err != nil {
		return res, errors.Wrap(err, "cannot install provider-kubernetes' CRDs")
	}
	if err := ensureNamespace(ctx, k.c.Client, peerNamespace); err != nil {
		return res, err
	}
	pc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": peerGVK.GroupVersion().String(),
		"kind":       "ClusterProviderConfig",
		"metadata":   map[string]any{"name": peerConfig},
		"spec": map[string]any{"credentials": map[string]any{
			"source":    "Secret",
			"secretRef": map[string]any{"namespace": cluster.CrossplaneNamespace, "name": cluster.KubeconfigSecret, "key": "kubeconfig"},
		}},
	}}
	if err := k.c.Client.Create(ctx, pc); err != nil {
		return res, errors.Wrap(err, "cannot create the peer's ClusterProviderConfig")
	}
	logf("kubernetes: peer: creating %d Objects (%d proxies; cold start: before it)", 4*r.o.n, r.o.n)
	objs := make([]*unstructured.Unstructured, 0, 4*r.o.n)
	for i := range r.o.n {
		proxy, err := peerObjects(i)
		if err != nil {
			return res, err
		}
		objs = append(objs, proxy...)
	}
	if err := parallel(ctx, len(objs), 10, func(ctx context.Context, i int) error {
		return client.IgnoreAlreadyExists(k.c.Client.Create(ctx, objs[i]))
	}); err != nil {
		return res, errors.Wrap(err, "cannot create the peer's Objects")
	}
	mrs, stopWatch, err := watchMRs(ctx, k.c.Config, k.c.Client, peerGVK)
	if err != nil {
		return res, err
	}
	defer stopWatch()
	ns, err := newPeerNetNS(ctx, k.ports(), filepath.Join(r.dir, "peer"))
	if err != nil {
		return res, err
	}
	defer ns.stop()
	p, err := ns.start(r, bin, k.c.Kubeconfig)
	if err != nil {
		return res, err
	}
	defer p.stop()
	logf("kubernetes: peer started (pid %d); waiting for %d Objects Synced and Ready and %d Deployments available", p.pid(), len(objs), r.o.n)
	e := &env{hosts: k.hosts()}
	if err := k.waitPeer(ctx, r, mrs, p, len(objs), res); err != nil {
		res.note = err.Error()
		return res, err
	}
	conv, err := r.counts(ctx, e, k, p)
	if err != nil {
		return res, err
	}
	res.converge, res.cpuConverge = conv, cpuSeconds(p.pid())
	conv, waited, err := r.settle(ctx, e, k, p, conv)
	if err != nil {
		return res, err
	}
	res.converge, res.settled = conv, waited
	cpuSettled := cpuSeconds(p.pid())
	logf("kubernetes: peer: writes settled %s after all Ready; steady state for %s", waited.Round(100*time.Millisecond), r.o.steady)
	select {
	case <-time.After(r.o.steady):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	st, err := r.counts(ctx, e, k, p)
	if err != nil {
		return res, err
	}
	res.steady, res.cpuSteady = st.minus(conv), cpuSeconds(p.pid())-cpuSettled
	res.steadyPolls = r.o.steady.Seconds() / r.o.poll.Seconds()
	res.mem = memory(p.pid())
	res.load = loadAvg()
	return res, nil
}

// waitPeer waits until every Object is Synced and Ready and every
// Deployment they made is available (the condition of the provider's
// Ready), recording the times from the peer's start.
func (k *kubeBench) waitPeer(ctx context.Context, r *runner, mrs client.Reader, p *process, n int, res *peerResult) error {
	cs, err := kubernetes.NewForConfig(k.target)
	if err != nil {
		return errors.Wrap(err, errBaselineClient)
	}
	deadline := time.Now().Add(r.o.timeout)
	var synced, ready, avail, logged int
	for time.Now().Before(deadline) {
		if s, rd, err := countConditions(ctx, mrs, peerGVK); err == nil {
			synced, ready = s, rd
			now := time.Since(p.started)
			if q := synced * 10 / n; q > logged && res.synced == 0 {
				logged = q
				logf("kubernetes: peer: %d/%d Synced at %.1f s", synced, n, now.Seconds())
			}
			if res.synced == 0 && synced == n {
				res.synced, res.cpuSynced = now, cpuSeconds(p.pid())
			}
			// Listing the Deployments every second loads the API server:
			// only once the Objects are done, as the baselines do.
			if synced == n && ready == n {
				l, err := cs.AppsV1().Deployments(peerNamespace).List(ctx, metav1.ListOptions{})
				if err == nil {
					avail = available(l.Items)
				}
				if avail == r.o.n {
					res.ready = time.Since(p.started)
					return nil
				}
			}
		}
		wait := countEvery
		if synced == n {
			wait = time.Second
		}
		select {
		case <-p.done:
			return errors.Errorf("the peer exited (log: %s)", p.logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	return errors.Errorf("%s: within %s: %d/%d Objects Synced, %d/%d Ready, %d/%d Deployments available", errPeer, r.o.timeout, synced, n, ready, n, avail, r.o.n)
}

// peerObjects are proxy i's four objects (those of the POST baseline, in
// peerNamespace) as the peer's Objects, in mrNamespace.
func peerObjects(i int) ([]*unstructured.Unstructured, error) {
	name := fmt.Sprintf("peer-%04d", i)
	var out []*unstructured.Unstructured
	for _, o := range kubeObjects(peerNamespace, name) {
		m, err := toApply(o)
		if err != nil {
			return nil, err
		}
		out = append(out, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": peerGVK.GroupVersion().String(),
			"kind":       peerGVK.Kind,
			"metadata":   map[string]any{"name": name + "-" + strings.ToLower(m.GetKind()), "namespace": mrNamespace},
			"spec": map[string]any{
				"forProvider":       map[string]any{"manifest": m.Object},
				"providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": peerConfig},
			},
		}})
	}
	return out, nil
}

// hosts names the API server's addresses as the provider's run does: the
// peer's kubeconfig says 127.0.0.1, the target's (the same Secret as the
// provider's) localhost.
func (k *kubeBench) hosts() map[string]string {
	u, _ := url.Parse(k.c.Config.Host)
	h := map[string]string{u.Host: controlPlane, "localhost:" + u.Port(): targetCluster}
	if k.relay != nil {
		h["localhost:"+k.relay.port()] = targetCluster
	}
	return h
}

// ports are the loopback ports the peer reaches the API server on: the
// API server's, and the fault relay's, which the target kubeconfig names
// with -faults.
func (k *kubeBench) ports() []string {
	u, _ := url.Parse(k.c.Config.Host)
	ps := []string{u.Port()}
	if k.relay != nil {
		ps = append(ps, k.relay.port())
	}
	return ps
}

// peerNetNS is a network namespace of the peer's own: its loopback
// forwards the API server's ports to the host's, and the host reaches its
// metrics through a forwarder on a free port.
type peerNetNS struct {
	dir    string
	holder *exec.Cmd
	path   string
	lns    []net.Listener
}

func newPeerNetNS(ctx context.Context, ports []string, dir string) (*peerNetNS, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, errors.Wrap(err, "cannot create the peer's folder")
	}
	n := &peerNetNS{dir: dir}
	var err error
	if n.holder, n.path, err = startNetNS(ctx); err != nil {
		return nil, errors.Wrap(err, "cannot create the peer's network namespace")
	}
	for _, port := range ports {
		addr := "127.0.0.1:" + port
		var l net.Listener
		err := testenv.InNetNS(n.path, func() error {
			var err error
			l, err = net.Listen("tcp", addr)
			return err
		})
		if err != nil {
			n.stop()
			return nil, errors.Wrap(err, "cannot forward the API server into the peer's network namespace")
		}
		n.lns = append(n.lns, l)
		go pipe(l, func() (net.Conn, error) { return net.Dial("tcp", addr) })
	}
	return n, nil
}

// start runs the peer in the namespace with the provider's settings.
func (n *peerNetNS) start(r *runner, bin, kubeconfig string) (*process, error) {
	certs := filepath.Join(n.dir, "tls")
	if err := selfSignedCert(certs); err != nil {
		return nil, err
	}
	args := []string{"-t", fmt.Sprint(n.holder.Process.Pid), "-n", "--", bin,
		"--poll=" + r.o.poll.String(),
		"--poll-jitter-percentage=0",
		fmt.Sprintf("--max-reconcile-rate=%d", r.o.rate),
		"--health-probe-bind-addr=127.0.0.1:8081",
	}
	// Its webhook server (for the cluster-scoped Object's conversion)
	// starts only with a certificate; nothing calls it here.
	p, err := startProcess(filepath.Join(n.dir, "provider-kubernetes.log"), "nsenter", args, []string{"KUBECONFIG=" + kubeconfig, "TLS_SERVER_CERTS_DIR=" + certs})
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		p.stop()
		return nil, errors.Wrap(err, "cannot listen for the peer's metrics")
	}
	n.lns = append(n.lns, l)
	go pipe(l, func() (net.Conn, error) {
		var c net.Conn
		err := testenv.InNetNS(n.path, func() error {
			var err error
			c, err = net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", peerMetricsPort))
			return err
		})
		return c, err
	})
	p.metricsURL = "http://" + l.Addr().String() + "/metrics"
	return p, nil
}

func (n *peerNetNS) stop() {
	for _, l := range n.lns {
		_ = l.Close()
	}
	if n.holder != nil && n.holder.Process != nil {
		_ = n.holder.Process.Kill()
		_ = n.holder.Wait()
	}
}

// pipe copies every connection l accepts to one dial opens, until l is
// closed.
func pipe(l net.Listener, dial func() (net.Conn, error)) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close() //nolint:errcheck // Either side may close first.
			out, err := dial()
			if err != nil {
				return
			}
			defer out.Close() //nolint:errcheck // Either side may close first.
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
			go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
			<-done
		}()
	}
}

// selfSignedCert writes tls.crt and tls.key for 127.0.0.1 to dir.
func selfSignedCert(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return errors.Wrap(err, "cannot create the peer's certificate folder")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return errors.Wrap(err, "cannot generate the peer's key")
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "provider-kubernetes"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return errors.Wrap(err, "cannot sign the peer's certificate")
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return errors.Wrap(err, "cannot encode the peer's key")
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return errors.Wrap(err, "cannot write the peer's certificate")
	}
	return errors.Wrap(os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600), "cannot write the peer's key")
}

// printPeer prints the side-by-side: per proxy, the provider's one
// KubernetesProxy against the peer's four Objects. Goal: ours/peer ≤ 0.5
// on time to all Synced, CPU while converging, steady CPU and peak RSS.
func (r *result) printPeer(w io.Writer, pr *peerResult) {
	n := float64(r.n)
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	p("\n### side by side: %s %s (load average %s after)\n\n", peerTool, pr.version, pr.load)
	if pr.note != "" {
		p("not complete: %s\n\n", pr.note)
	}
	p("Per proxy: one KubernetesProxy (ours) against four Objects (the same ConfigMap, Secret, Deployment and Service); the same API server and target kubeconfig, --poll=%s without jitter, --max-reconcile-rate=%d; the peer's other flags at their defaults (server-side apply on, watches off). Ready: every Deployment available, for both.\n\n", r.poll, pr.rate)
	p("| figure | ours | peer | ours/peer |\n|---|---|---|---|\n")
	p("| time to all Synced | %s | %s | %s |\n", secs(r.synced), secs(pr.synced), ratio(r.synced.Seconds(), pr.synced.Seconds()))
	p("| time to all Ready | %s | %s | %s |\n", secs(r.ready), secs(pr.ready), ratio(r.ready.Seconds(), pr.ready.Seconds()))
	p("| CPU until all Synced | %s | %s | %s |\n", cpu(r.cpuSynced), cpu(pr.cpuSynced), ratio(r.cpuSynced, pr.cpuSynced))
	p("| CPU while converging (until all Ready) | %s | %s | %s |\n", cpu(r.cpuConverge), cpu(pr.cpuConverge), ratio(r.cpuConverge, pr.cpuConverge))
	if r.steadyPolls > 0 && pr.steadyPolls > 0 {
		o, q := 1000*r.cpuSteady/n/r.steadyPolls, 1000*pr.cpuSteady/n/pr.steadyPolls
		p("| steady: CPU per proxy per poll | %.2f ms | %.2f ms | %s |\n", o, q, ratio(o, q))
	}
	p("| peak RSS | %s | %s | %s |\n", mib(r.mem.peak), mib(pr.mem.peak), ratio(float64(r.mem.peak), float64(pr.mem.peak)))
	p("| requests per proxy while converging | %s | %s | %s |\n", num(r.converge.total()/n), num(pr.converge.total()/n), ratio(r.converge.total(), pr.converge.total()))
	if r.steadyPolls > 0 && pr.steadyPolls > 0 {
		o, q := r.steady.total()/n/r.steadyPolls, pr.steady.total()/n/pr.steadyPolls
		p("| steady: requests per proxy per poll | %s | %s | %s |\n", num(o), num(q), ratio(o, q))
	}
	p("\n| peer: requests per proxy, by target and verb | converging | steady, per poll |\n|---|---|---|\n")
	for _, k := range sortedKeys(pr.converge, pr.steady) {
		steady := "-"
		if pr.steadyPolls > 0 {
			steady = num(pr.steady[k] / n / pr.steadyPolls)
		}
		p("| %s %s | %s | %s |\n", k.target, k.verb, num(pr.converge[k]/n), steady)
	}
}

// startNetNS starts a process that holds a new network namespace, with
// loopback up, until it is killed (and dies with the bench), and returns it
// and the namespace's path.
func startNetNS(ctx context.Context) (*exec.Cmd, string, error) {
	holder := exec.Command("unshare", "--net", "sleep", "infinity")
	holder.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := holder.Start(); err != nil {
		return nil, "", errors.Wrap(err, "cannot start the namespace's holder")
	}
	kill := func() {
		_ = holder.Process.Kill()
		_ = holder.Wait()
	}
	path := fmt.Sprintf("/proc/%d/ns/net", holder.Process.Pid)
	host, _ := os.Readlink("/proc/self/ns/net")
	for i := 0; ; i++ {
		// unshare enters the namespace before it runs sleep.
		if l, err := os.Readlink(path); err == nil && l != host {
			break
		}
		if i == 100 {
			kill()
			return nil, "", errors.New("the network namespace did not appear")
		}
		select {
		case <-ctx.Done():
			kill()
			return nil, "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if out, err := exec.CommandContext(ctx, "nsenter", "--net="+path, "--", "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil { //nolint:gosec // Our own holder.
		kill()
		return nil, "", errors.Wrapf(err, "cannot bring up loopback: %s", out)
	}
	return holder, path, nil
}
