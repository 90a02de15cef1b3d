/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Command dev runs the product locally for make dev: a local Crossplane
// control plane (internal/testenv/cluster) with the provider, the function,
// the XRD and Compositions, then the example claims of every backend that
// can run here, in namespace team-a. It waits until they are Ready, prints
// crossplane beta trace of each and the keys of its connection Secret, sends
// one request through each proxy (traffic.go), and runs until Ctrl-C.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

const (
	errFmtBackend = "unknown backend %q: it must be one of %v"
)

// options are the command line flags.
type options struct {
	dir       string
	backends  string
	namespace string
	timeout   time.Duration
	debug     bool
	once      bool
}

func main() {
	o := options{}
	flag.StringVar(&o.dir, "dir", filepath.Join(testenv.RepoRoot(), "_output", "dev"), "Folder for state and logs.")
	flag.StringVar(&o.backends, "backends", "auto", "Comma-separated backends to run claims on; auto means every backend the provider builds in that can run here.")
	flag.StringVar(&o.namespace, "namespace", "team-a", "Namespace of the example claims.")
	flag.DurationVar(&o.timeout, "timeout", 8*time.Minute, "How long the claims may take to become Ready (a proxy VM booting under emulation takes minutes).")
	flag.BoolVar(&o.debug, "debug", false, "Run Crossplane, the function and the provider with debug logs.")
	flag.BoolVar(&o.once, "once", false, "Stop once the claims are Ready, instead of running until Ctrl-C (for CI).")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, o)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		fmt.Fprintln(os.Stderr, "[dev] interrupted")
		stop()
		os.Exit(130)
	case err != nil:
		fmt.Fprintf(os.Stderr, "\n[dev] FAILED: %v\n", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	p := newPrinter()
	backends, err := chooseBackends(o.backends, p)
	if err != nil {
		return err
	}
	// A fresh state folder: nothing of a previous run is reused.
	_ = os.RemoveAll(o.dir)
	if err := envtestLog(filepath.Join(o.dir, "logs", "envtest.log")); err != nil {
		return err
	}
	c, err := cluster.Start(ctx, cluster.Options{Dir: o.dir, Backends: backends, Debug: o.debug, Logf: p.logf})
	if err != nil {
		return err
	}
	defer func() {
		p.logf("stopping everything")
		c.Stop()
		p.logf("stopped")
	}()
	claims, err := applyExamples(ctx, c, p, o.namespace, runnable(c, p, backends))
	if err != nil {
		return err
	}
	if err := waitReady(ctx, c, p, o.namespace, claims, o.timeout); err != nil {
		return err
	}
	report(ctx, c, o.namespace, claims)
	proxiedRequests(ctx, c, o.namespace, claims)
	p.timings(c.Timings)
	// Where each part runs: core, the RBAC manager, CoreDNS, the provider
	// and the function are pods on the node.
	if out, err := exec.CommandContext(ctx, c.Tools.Kubectl, "--kubeconfig", c.Kubeconfig, "get", "pods", "-A", "-o", "wide").CombinedOutput(); err == nil { //nolint:gosec // The tool cache's kubectl.
		fmt.Printf("[dev] kubectl get pods -A -o wide\n%s", out)
	}
	for _, t := range c.Timings {
		if t.Step == cluster.StepInstall {
			fmt.Printf("[dev] INSTALL TIME: Configurations applied → Configurations, Provider and Function installed from %s by Crossplane's package manager, every object established, in %s\n",
				c.PackageRepo, t.Duration)
		}
	}
	fmt.Printf(`
[dev] Everything is running (%s since start).
      export KUBECONFIG=%s
      kubectl get egressproxyclaim -n %s     # the claims
      kubectl get managed -A                  # their managed resources
      %s beta trace egressproxyclaim NAME -n %s
      Logs: %s; kubectl logs -n crossplane-system -l pkg.crossplane.io/provider=%s
      Ctrl-C stops everything.
`, p.since(), c.Kubeconfig, o.namespace, c.Tools.Crossplane, o.namespace, c.LogDir, cluster.ProviderName)
	if o.once {
		return nil
	}
	<-ctx.Done()
	return nil
}

// runnable drops the backends whose claims cannot become Ready here.
func runnable(c *cluster.Cluster, p *printer, backends []cluster.Backend) []cluster.Backend {
	var out []cluster.Backend
	for _, b := range backends {
		switch why, unavailable := c.Unavailable[b]; {
		case unavailable:
			p.logf("backend %-10s skipped: %s", b, why)
		default:
			out = append(out, b)
		}
	}
	return out
}

// envtestLog sends the logs of envtest (which starts kube-apiserver and
// etcd) to a file.
func envtestLog(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.Create(path) //nolint:gosec // Our own log file.
	if err != nil {
		return err
	}
	ctrllog.SetLogger(zap.New(zap.WriteTo(f)))
	return nil
}

// chooseBackends returns the backends to run claims on: those the flag
// names, or with auto every backend of the provider whose test double can
// run here.
func chooseBackends(flagValue string, p *printer) ([]cluster.Backend, error) {
	all := cluster.Backends()
	if flagValue != "auto" {
		var out []cluster.Backend
		for _, b := range strings.Split(flagValue, ",") {
			cb := cluster.Backend(strings.TrimSpace(b))
			if !slices.Contains(all, cb) {
				return nil, errors.Errorf(errFmtBackend, b, all)
			}
			out = append(out, cb)
		}
		return out, nil
	}
	var out []cluster.Backend
	for _, b := range all {
		if why := cluster.CannotRun(b); why != "" {
			p.logf("backend %-10s skipped: %s", b, why)
			continue
		}
		out = append(out, b)
	}
	return out, nil
}
