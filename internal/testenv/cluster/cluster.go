/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package cluster brings up a local Crossplane control plane that behaves
// like a real cluster, from binaries hack/tools.sh builds: a real node
// (package node: kubelet, containerd, the squid image) with etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kube-proxy
// inside its network namespace, where the pods are, and CoreDNS as a pod;
// Crossplane installed from its own Helm chart (core and the RBAC manager
// as pods, from an image pushed to the harness's registry); the
// Configurations installed from that registry, whose Provider and Function
// Crossplane's Deployment runtime runs as pods from their package images;
// and the backends' ProviderConfigs and test doubles (the GCE fake, a
// private libvirtd that boots the real guest image). The end-to-end suite
// and make dev share it. Where no real node can run, Start fails with
// ErrMissing (StartBare runs kwok's fake nodes for what needs no pods).
//
// Every process it starts is stopped by PID when the Cluster stops, and a
// watchdog kills them if the process that started them dies first.
package cluster

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/node"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/ociregistry"
)

const (
	errNoFreePort  = "cannot find a free port on 127.0.0.1"
	errMkdir       = "cannot create the state folder"
	errFmtStep     = "step %q failed after %s (log: %s)"
	errFmtExited   = "%s exited (%v)"
	errClient      = "cannot create a client"
	errFmtTools    = "tools are not built: %s (hack/tools.sh build %s)"
	errCPStart     = "cannot start kube-apiserver and etcd"
	errBinaries    = "the GCE fake or the Provider and Function packages were not built"
	defaultNodes   = 2
	defaultTimeout = 3 * time.Minute
	buildTimeout   = 15 * time.Minute
)

// Options configure Start.
type Options struct {
	// Dir holds state, binaries and logs (Dir/logs). When empty Start uses
	// a temporary folder that Stop removes.
	Dir string
	// Nodes is the number of fake nodes, 2 when zero. Start runs a real
	// node instead where it can.
	Nodes int
	// Backends are the backends whose test doubles and ProviderConfigs to
	// set up besides those always set up (doubles.go).
	Backends []Backend
	// Debug runs Crossplane, the function and the provider with debug logs.
	Debug bool
	// ProviderArgs are extra flags of the provider, as a
	// DeploymentRuntimeConfig would give them.
	ProviderArgs []string
	// Logf reports progress; nothing is reported when nil.
	Logf func(format string, args ...any)
}

// A Timing is how long a step took.
type Timing struct {
	Step     string
	Duration time.Duration
}

// A Cluster is a running local control plane.
type Cluster struct {
	// Config reaches the apiserver as a member of system:masters.
	Config *rest.Config
	// Client reads and writes core types, the provider's APIs and, as
	// unstructured objects, Crossplane's.
	Client client.Client
	// Kubeconfig is the path of a kubeconfig file for Config.
	Kubeconfig string
	// InClusterKubeconfig is Kubeconfig for pods on the real node: its
	// server is https://kubernetes.default.svc. Empty without a real node.
	InClusterKubeconfig string
	// Dir holds state; LogDir the log of every process.
	Dir, LogDir string
	// Tools and Bin are the programs it runs.
	Tools Tools
	Bin   Binaries
	// Timings of the steps Start took, in order.
	Timings []Timing
	// GCE is the GCE fake, when the gcp backend was set up.
	GCE *GCE
	// Libvirt is the private libvirtd, when the kvm backend was set up.
	Libvirt *Libvirt
	// Node is the real node every pod runs on, with the control plane and
	// package traffic's addresses in its network namespace. Where it cannot
	// run, NoRealNode says why and Start fails.
	Node       *node.Node
	NoRealNode string
	// SquidImage is the squid image the real node has (no registry).
	SquidImage string
	// ProviderRevisionName and FunctionRevisionName are the active
	// revisions whose pods Crossplane's Deployment runtime runs
	// (ProviderPods, FunctionPods).
	ProviderRevisionName, FunctionRevisionName string
	// ProviderServiceAccount is namespace:name of the ServiceAccount the
	// provider's pods run as (examples/rbac's DeploymentRuntimeConfig
	// names it).
	ProviderServiceAccount string
	// RegistryHost is where the node and its pods reach the registry
	// (node.BridgeIP:port); the host pushes through its loopback.
	RegistryHost string
	// PackageDigests are the digests pushed, by reference
	// (REGISTRY/org/name:version).
	PackageDigests map[string]string
	// PackageRepo is registry/org, where the packages are pushed.
	PackageRepo string
	// Unavailable are the backends asked for whose test doubles cannot run
	// on this machine, and why: Start goes on without them.
	Unavailable map[Backend]string

	opts           Options
	kube           *kube.Env
	sup            *supervisor
	tempDir        bool
	crossplaneCRDs string
	registry       *ociregistry.Registry
	runtime        providerRuntime
	mu             sync.Mutex
	kept           bool
	cleanups       []func()
}

// Start brings up the control plane. On error it stops what it started.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Nodes == 0 {
		o.Nodes = defaultNodes
	}
	c := &Cluster{opts: o, Dir: o.Dir}
	tools, missing := FindTools()
	if len(missing) > 0 {
		return nil, errors.Errorf(errFmtTools, strings.Join(missing, ", "), strings.Join(missing, " "))
	}
	c.Tools = tools
	if err := c.mkdirs(); err != nil {
		return nil, err
	}
	sup, err := newSupervisor(c.LogDir)
	if err != nil {
		return nil, err
	}
	c.sup = sup
	if c.tempDir {
		sup.removeOnAbort(c.Dir)
	}
	if err := c.start(ctx); err != nil {
		// Keep the logs the error points at.
		c.Keep()
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) mkdirs() error {
	if c.Dir == "" {
		d, err := os.MkdirTemp("", "egressproxy-cluster-")
		if err != nil {
			return errors.Wrap(err, errMkdir)
		}
		c.Dir, c.tempDir = d, true
	}
	c.LogDir = filepath.Join(c.Dir, "logs")
	return errors.Wrap(os.MkdirAll(c.LogDir, 0o750), errMkdir)
}

// A step of Start: its name, the log (under LogDir) to look at when it
// fails, and what it does.
type step struct {
	name, log string
	fn        func(context.Context) error
	// timeout of the step; defaultTimeout when zero.
	timeout time.Duration
}

// start runs the steps. Building this repository's programs and packages
// overlaps with bringing up the control plane: both take seconds, on
// different things.
func (c *Cluster) start(ctx context.Context) error {
	if err := c.startRegistry(); err != nil {
		return err
	}
	built := make(chan error, 1)
	go func() {
		b, err := BuildBinaries(ctx, c.dir("bin"))
		c.Bin = b
		if err == nil {
			err = c.push(ctx, c.build("", "provider", "function"))
		}
		built <- err
	}()
	// The control plane runs inside the real node's network namespace,
	// so the node's namespaces come first and its kubelet last.
	if err := c.runSteps(ctx, []step{{name: "real node: namespaces and containerd", log: "containerd.log", fn: c.newRealNode}}); err != nil {
		return err
	}
	steps := []step{
		{name: "kube-apiserver and etcd (in the node)", log: "kube-apiserver.log", fn: c.startNodeControlPlane},
		{name: "kube-controller-manager", log: "kube-controller-manager.log", fn: c.startKCM},
		{name: "kube-scheduler", log: "kube-scheduler.log", fn: c.startScheduler},
		{name: "kubelet: the real node Ready", log: "kubelet.log", fn: c.startKubelet},
		{name: "kube-proxy", log: "kube-proxy.log", fn: c.startKubeProxy},
		{name: "cluster DNS (CoreDNS)", fn: c.startDNS},
	}
	steps = append(steps,
		step{name: "Crossplane from its Helm chart (pods)", log: "", fn: c.startCrossplane, timeout: crossplaneTimeout + time.Minute},
		// A cold Go build cache takes minutes on 2 busy cores.
		step{name: "build and push Provider and Function", timeout: buildTimeout, fn: func(context.Context) error {
			return errors.Wrap(<-built, errBinaries)
		}},
		step{name: "build and push the Configurations", fn: c.buildConfigurations},
		step{name: StepInstall, log: "crossplane.log", fn: c.installConfigurations},
		step{name: "provider and function pods (Deployment runtime)", fn: c.runPackages, timeout: runtimeTimeout + time.Minute},
	)
	return c.runSteps(ctx, append(steps, c.backendSteps()...))
}

// runSteps runs steps in order, each bounded by its timeout.
func (c *Cluster) runSteps(ctx context.Context, steps []step) error {
	for _, s := range steps {
		if s.timeout == 0 {
			s.timeout = defaultTimeout
		}
		sctx, cancel := context.WithTimeout(ctx, s.timeout)
		err := c.Step(sctx, s.name, s.log, s.fn)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// StepInstall is the step from applying the Configurations to every
// package installed: its Timing is the install time.
const StepInstall = "install: Configurations → packages installed"

// optional turns an ErrMissing of a backend's setup into an entry of
// Unavailable.
func (c *Cluster) optional(b Backend, fn func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		err := fn(ctx)
		if errors.Is(err, ErrMissing) {
			if c.Unavailable == nil {
				c.Unavailable = map[Backend]string{}
			}
			c.Unavailable[b] = err.Error()
			c.logf("the %s backend is unavailable here: %v", b, err)
			return nil
		}
		return err
	}
}

// Step runs one timed step, reports it, and names it and its log when it
// fails. Bound it with ctx.
func (c *Cluster) Step(ctx context.Context, name, log string, fn func(context.Context) error) error {
	c.logf("%-40s ...", name)
	t := time.Now()
	err := fn(ctx)
	d := time.Since(t).Round(10 * time.Millisecond)
	c.Timings = append(c.Timings, Timing{Step: name, Duration: d})
	if err != nil {
		where := c.LogDir
		if log != "" {
			where = filepath.Join(c.LogDir, log)
		}
		c.logf("%-40s FAILED after %s: %v", name, d, err)
		return errors.Wrapf(err, errFmtStep, name, d, where)
	}
	c.logf("%-40s done in %s", name, d)
	return nil
}

func (c *Cluster) logf(format string, args ...any) {
	if c.opts.Logf != nil {
		c.opts.Logf(format, args...)
	}
}

// Keep makes Stop keep the state folder and its logs even when Start made
// it, say because a test failed.
func (c *Cluster) Keep() { c.tempDir, c.kept = false, true }

// Stop stops every process, newest first, and the control plane, and
// removes the state folder if Start made it. A kept cluster first writes
// the logs of its pods (Crossplane, the packages, CoreDNS), which the node
// keeps in its own folder, to LogDir/pods.log.
func (c *Cluster) Stop() {
	if c.kept && c.Config != nil && c.Node != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var b strings.Builder
		for _, ns := range []string{CrossplaneNamespace, "kube-system"} {
			b.WriteString(c.PodLogs(ctx, ns, "", 100000))
		}
		cancel()
		_ = os.WriteFile(filepath.Join(c.LogDir, "pods.log"), []byte(b.String()), 0o600)
	}
	if c.sup != nil {
		c.sup.stopAll()
	}
	for i := len(c.cleanups) - 1; i >= 0; i-- {
		c.cleanups[i]()
	}
	if c.kube != nil {
		c.kube.Stop()
	}
	if c.sup != nil {
		c.sup.close()
	}
	if c.tempDir {
		_ = os.RemoveAll(c.Dir)
	}
}

// dir returns (and creates) a folder under the state folder.
func (c *Cluster) dir(elem ...string) string {
	d := filepath.Join(append([]string{c.Dir}, elem...)...)
	_ = os.MkdirAll(d, 0o750)
	return d
}

// waitFor polls cond until it is true, p exits (p may be nil), or the
// timeout passes.
func (c *Cluster) waitFor(ctx context.Context, p *Process, timeout time.Duration, msg string, cond func(context.Context) (bool, error)) error {
	var exited <-chan struct{}
	if p != nil {
		exited = p.Exited()
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, errors.Errorf(errFmtExited, p.Name, p.Err())
		default:
		}
		return cond(ctx)
	})
	if err != nil && wait.Interrupted(err) {
		return errors.New(msg)
	}
	return errors.Wrap(err, msg)
}

// freePort returns a port that is free on 127.0.0.1 now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, errors.Wrap(err, errNoFreePort)
	}
	defer l.Close() //nolint:errcheck // Only its port was needed.
	return l.Addr().(*net.TCPAddr).Port, nil
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
