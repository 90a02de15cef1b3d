/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

const (
	// mrNamespace holds the managed resources of every backend.
	mrNamespace = "bench"
	// instance is the provider's explicit --provider-instance.
	instance = "bench"

	errFmtBuild     = "cannot build the provider: %s"
	errCreateMRs    = "cannot create the managed resources"
	errProviderUp   = "the provider did not become ready"
	errFmtConverged = "not every MR became Synced and Ready within %s: %d/%d Synced, %d/%d Ready"
	errScrape       = "cannot read the provider's metrics"
)

// A bench is what one backend adds to the common run.
type bench interface {
	// gvk is the kind of its managed resource.
	gvk() schema.GroupVersionKind
	// start brings up the control plane, the backend's test double and a
	// ProviderConfig named default.
	start(ctx context.Context, r *runner) (*env, error)
	// mr returns managed resource i, in mrNamespace.
	mr(i int) *unstructured.Unstructured
	// backendCounts are the requests counted outside the provider (at the
	// GCE fake), added to the provider's own.
	backendCounts() counts
	// baseline creates the same backend objects with the raw client.
	baseline(ctx context.Context, r *runner) (*baselineResult, error)
	// stop stops what start started.
	stop()
	// dataPlane is the squid configuration and access log path of the
	// backend's proxies, for the proxy overhead bench (overhead.go).
	dataPlane() dataPlane
}

// benches are the backends' benches, each registered from the backend's
// own file: var _ = registerBench(b, ...).
var benches = map[string]func() bench{}

func registerBench(b cluster.Backend, mk func() bench) bool {
	benches[string(b)] = mk
	return true
}

// env is what a bench started.
type env struct {
	cfg        *rest.Config
	client     client.Client
	kubeconfig string
	// hosts names the targets of the provider's API requests by host:port.
	hosts map[string]string
	// opsAreRequests: the provider's backend operations are the backend's
	// requests (libvirt, whose RPCs are counted nowhere else).
	opsAreRequests bool
	// mrs reads the managed resources from a watch (watchMRs).
	mrs client.Reader
}

// runner runs one backend.
type runner struct {
	o           options
	providerBin string
	dir         string
	backend     string
}

func (r *runner) run(ctx context.Context, mk func() bench) (*result, error) {
	if err := os.MkdirAll(r.dir, 0o750); err != nil {
		return nil, errors.Wrap(err, "cannot create the state folder")
	}
	b := mk()
	res := &result{backend: r.backend, n: r.o.n, poll: r.o.poll, loadBefore: loadAvg()}
	logf("%s: starting the control plane and the backend", r.backend)
	e, err := b.start(ctx, r)
	defer b.stop()
	if err != nil {
		return nil, err
	}
	res.opsNotRPCs = e.opsAreRequests
	if err := ensureNamespace(ctx, e.client, mrNamespace); err != nil {
		return nil, err
	}
	// The provider keeps the key of generated passwords in its namespace.
	if err := ensureNamespace(ctx, e.client, cluster.CrossplaneNamespace); err != nil {
		return nil, err
	}
	logf("%s: creating %d managed resources (cold start: before the provider)", r.backend, r.o.n)
	if err := parallel(ctx, r.o.n, 10, func(ctx context.Context, i int) error {
		return client.IgnoreAlreadyExists(e.client.Create(ctx, b.mr(i)))
	}); err != nil {
		return nil, errors.Wrap(err, errCreateMRs)
	}
	mrs, stopWatch, err := watchMRs(ctx, e.cfg, e.client, b.gvk())
	if err != nil {
		return nil, err
	}
	defer stopWatch()
	e.mrs = mrs

	// The apiserver's CPU from the provider's start: what the provider's
	// requests and watches cost it, next to what the baselines' cost.
	api0 := markAPIServer()
	p, err := r.startProvider(ctx, e)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	logf("%s: provider started (pid %d); waiting for %d Synced and Ready", r.backend, p.pid(), r.o.n)
	// While converging: the first 30 s, where a cold start spends most.
	convProfile := r.profile(ctx, p, "converge", 30*time.Second)
	apiProfile := r.apiProfile(ctx, e, "converge", 30*time.Second)
	if err := r.waitConverged(ctx, e, b.gvk(), p, api0, res); err != nil {
		res.note = err.Error()
		return res, err
	}
	conv, err := r.counts(ctx, e, b, p)
	if err != nil {
		return res, err
	}
	res.converge, res.cpuConverge = conv, cpuSeconds(p.pid())
	res.apiConverge = markAPIServer().since(api0)
	logf("%s: all Ready after %s", r.backend, res.ready.Round(100*time.Millisecond))
	<-convProfile
	<-apiProfile
	// Writes the converging queued may still be on their way (the event
	// recorder sends its events one at a time): they are the converging's,
	// and the steady window starts once they are done.
	conv, waited, err := r.settle(ctx, e, b, p, conv)
	if err != nil {
		return res, err
	}
	res.converge, res.settled = conv, waited
	cpuSettled, apiConv := cpuSeconds(p.pid()), markAPIServer()
	logf("%s: control-plane writes settled %s after all Ready; steady state for %s", r.backend, waited.Round(100*time.Millisecond), r.o.steady)
	steadyProfile := r.profile(ctx, p, "steady", r.o.steady)
	select {
	case <-time.After(r.o.steady):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	<-steadyProfile
	st, err := r.counts(ctx, e, b, p)
	if err != nil {
		return res, err
	}
	res.steady, res.cpuSteady = st.minus(conv), cpuSeconds(p.pid())-cpuSettled
	res.apiSteady = markAPIServer().since(apiConv)
	res.steadyPolls = r.o.steady.Seconds() / r.o.poll.Seconds()
	res.mem = memory(p.pid())
	r.heapProfile(ctx, p)
	if f, ok := b.(faulter); ok && r.o.faults {
		for _, ft := range f.faults() {
			fr, err := r.faultRun(ctx, e, b, p, ft)
			res.faults = append(res.faults, fr)
			if err != nil {
				return res, err
			}
		}
	}
	p.stop()

	// The peer next, on the API server as the provider left it: the two
	// runs of the side-by-side are adjacent.
	if pb, ok := b.(peered); ok && r.o.peer {
		res.peer, err = pb.peer(ctx, r)
		switch {
		case errors.Is(err, errMissing) && !testenv.InCI():
			logf("%s: peer SKIPPED: %v (CI=true makes this a failure)", r.backend, err)
		case err != nil:
			res.loadAfter = loadAvg()
			return res, errors.Wrap(err, errPeer)
		}
	}

	if !r.o.baselines {
		res.loadAfter = loadAvg()
		return res, nil
	}
	logf("%s: baseline", r.backend)
	base, err := b.baseline(ctx, r)
	res.base = base
	res.loadAfter = loadAvg()
	return res, errors.Wrap(err, "baseline")
}

// A peered bench also runs a peer provider on the same objects (-peer).
type peered interface {
	peer(ctx context.Context, r *runner) (*peerResult, error)
}

// profile writes a CPU profile of the provider over d to
// <-profile>/<backend>-<phase>.pprof, when -profile is set. The channel is
// closed when it is written (or failed: a profile is not worth failing the
// run for).
func (r *runner) profile(ctx context.Context, p *process, phase string, d time.Duration) <-chan struct{} {
	return r.saveProfile(r.backend+"-"+phase, func() (io.ReadCloser, error) {
		return httpBody(ctx, fmt.Sprintf("%s?seconds=%d", p.pprofURL, int(d.Seconds())))
	})
}

// apiProfile writes a CPU profile of the control plane's kube-apiserver
// over d to <-profile>/<backend>-apiserver-<phase>.pprof, when -profile is
// set: what the provider's requests and watches cost the API server.
func (r *runner) apiProfile(ctx context.Context, e *env, phase string, d time.Duration) <-chan struct{} {
	return r.saveProfile(r.backend+"-apiserver-"+phase, func() (io.ReadCloser, error) {
		cfg := rest.CopyConfig(e.cfg)
		cfg.Timeout = d + time.Minute
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		return cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", fmt.Sprint(int(d.Seconds()))).Stream(ctx)
	})
}

// saveProfile writes what fetch returns to <-profile>/<name>.pprof, when
// -profile is set, in the background.
func (r *runner) saveProfile(name string, fetch func() (io.ReadCloser, error)) <-chan struct{} {
	done := make(chan struct{})
	if r.o.profile == "" {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		path := filepath.Join(r.o.profile, name+".pprof")
		body, err := fetch()
		if err != nil {
			logf("no profile %s: %v", name, err)
			return
		}
		defer body.Close()        //nolint:errcheck // Read only.
		f, err := os.Create(path) //nolint:gosec // A path the user named.
		if err != nil {
			logf("no profile %s: %v", name, err)
			return
		}
		defer f.Close() //nolint:errcheck // Best effort.
		if _, err := io.Copy(f, body); err == nil {
			logf("profile: %s", path)
		}
	}()
	return done
}

// heapProfile writes the provider's heap profile to
// <-profile>/<backend>-heap.pprof, when -profile is set: what the peak RSS
// is made of (go tool pprof -sample_index=inuse_space).
func (r *runner) heapProfile(ctx context.Context, p *process) {
	<-r.saveProfile(r.backend+"-heap", func() (io.ReadCloser, error) {
		return httpBody(ctx, strings.TrimSuffix(p.pprofURL, "profile")+"heap")
	})
}

// httpBody is the body of a GET of url.
func httpBody(ctx context.Context, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// startProvider runs cmd/provider against the control plane.
func (r *runner) startProvider(ctx context.Context, e *env) (*process, error) {
	metrics, health, pprof := freePort(), freePort(), freePort()
	args := []string{
		"--poll=" + r.o.poll.String(),
		// One poll for every backend, watching or not, and no jitter: the
		// steady window is one poll of every MR.
		"--poll-watched=" + r.o.poll.String(),
		"--poll-jitter=0",
		fmt.Sprintf("--max-reconcile-rate=%d", r.o.rate),
		"--provider-instance=" + instance,
		"--namespace=" + cluster.CrossplaneNamespace,
		// libvirt's test driver has no guest agent: Ready is running with an address.
		"--no-kvm-serve-probe",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", health),
		fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", pprof),
	}
	args = append(args, r.o.providerFlags...)
	p, err := startProcess(filepath.Join(r.dir, "provider.log"), r.providerBin, args, append([]string{"KUBECONFIG=" + e.kubeconfig}, r.o.providerEnv...))
	if err != nil {
		return nil, err
	}
	p.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
	p.pprofURL = fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile", pprof)
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", health)
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if httpOK(ctx, ready) {
			return p, nil
		}
		select {
		case <-p.done:
			return nil, errors.Errorf("%s: the provider exited (log: %s)", errProviderUp, p.logPath)
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	p.stop()
	return nil, errors.Errorf("%s (log: %s)", errProviderUp, p.logPath)
}

// countEvery is how often waitConverged counts: from the watch's cache,
// so often is cheap, and the times are within it.
const countEvery = 250 * time.Millisecond

// waitConverged polls the managed resources until every one is Synced and
// Ready, and records when each condition first held for all, counted from
// the provider's start; and the apiserver's CPU from api0 until all Synced.
func (r *runner) waitConverged(ctx context.Context, e *env, gvk schema.GroupVersionKind, p *process, api0 cpuMark, res *result) error {
	deadline := time.Now().Add(r.o.timeout)
	var synced, ready, logged int
	for time.Now().Before(deadline) {
		if s, rd, err := countConditions(ctx, e.mrs, gvk); err == nil {
			synced, ready = s, rd
			now := time.Since(p.started)
			// The curve tells a throughput bound (steady) from a tail.
			if q := synced * 10 / r.o.n; q > logged && res.synced == 0 {
				logged = q
				logf("%s: %d/%d Synced at %.1f s", r.backend, synced, r.o.n, now.Seconds())
			}
			if res.synced == 0 && synced == r.o.n {
				res.synced = now
				res.cpuSynced = cpuSeconds(p.pid())
				res.apiSynced = markAPIServer().since(api0)
			}
			if synced == r.o.n && ready == r.o.n {
				res.ready = now
				return nil
			}
		}
		select {
		case <-p.done:
			return errors.Errorf("the provider exited (log: %s)", p.logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(countEvery):
		}
	}
	return errors.Errorf(errFmtConverged, r.o.timeout, synced, r.o.n, ready, r.o.n)
}

// Settling: the control plane's writes have settled when none came in
// settleQuiet; settle gives up waiting after settleMax.
const (
	settleQuiet = 3 * time.Second
	settleMax   = 2 * time.Minute
)

// settle waits until the provider's control-plane writes have settled and
// returns the counts then, and how long it waited.
func (r *runner) settle(ctx context.Context, e *env, b bench, p *process, last counts) (counts, time.Duration, error) {
	start, quiet := time.Now(), time.Now()
	for time.Since(start) < settleMax && time.Since(quiet) < settleQuiet {
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
		c, err := r.counts(ctx, e, b, p)
		if err != nil {
			return nil, 0, err
		}
		if c.writes(controlPlane) != last.writes(controlPlane) {
			quiet = time.Now()
		}
		last = c
	}
	return last, time.Since(start), nil
}

// counts returns every request so far: the provider's metrics, and what the
// bench counted at the backend.
func (r *runner) counts(ctx context.Context, e *env, b bench, p *process) (counts, error) {
	s, err := scrape(ctx, p.metricsURL)
	if err != nil {
		return nil, errors.Wrap(err, errScrape)
	}
	c := counts{}
	for _, m := range s {
		switch m.name {
		case "rest_client_requests_total":
			target, ok := e.hosts[m.labels["host"]]
			if !ok {
				target = "apiserver " + m.labels["host"]
			}
			c[reqKey{target: target, verb: m.labels["method"]}] += m.value
		case "controller_runtime_reconcile_total":
			// The managed resources' controllers only; their rate limiter's
			// refusals count as requeue_after.
			if strings.HasPrefix(m.labels["controller"], "managed/") {
				c[reqKey{target: reconciles, verb: m.labels["result"]}] += m.value
			}
		case "egressproxy_backend_calls_total":
			if e.opsAreRequests {
				c[reqKey{target: targetVirt + " (provider backend ops)", verb: m.labels["operation"]}] += m.value
			}
		}
	}
	for k, v := range b.backendCounts() {
		c[k] += v
	}
	return c, nil
}

func conditionTrue(u *unstructured.Unstructured, typ string) bool {
	cs, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range cs {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ {
			return m["status"] == "True"
		}
	}
	return false
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// parallel runs fn for 0..n-1 on workers goroutines, and returns the first
// error.
func parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range min(workers, max(n, 1)) {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	return errors.Wrapf(client.IgnoreAlreadyExists(c.Create(ctx, ns)), "cannot create namespace %s", name)
}

// buildProvider builds cmd/provider of this checkout into dir.
func buildProvider(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "provider")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/provider")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.Errorf(errFmtBuild, strings.TrimSpace(string(out))+": "+err.Error())
	}
	return bin, nil
}

// toolCached returns the path hack/tools.sh cached prints, or "".
func toolCached(name string) string {
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "tools.sh"), "cached", name).Output() //nolint:gosec // Our own script.
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// freePort returns a port that is free on 127.0.0.1 now.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close() //nolint:errcheck // Only its port was needed.
	return l.Addr().(*net.TCPAddr).Port
}

func httpOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = rsp.Body.Close()
	return rsp.StatusCode == http.StatusOK
}
