/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Command bench measures the provider at scale (make bench, docs/bench.md).
//
// Per backend it creates N managed resources, then starts the provider built
// from cmd/provider as a process (cold start), and times until every MR is
// Synced and Ready; it reads the provider's CPU time and peak RSS from /proc
// and its requests from its own metrics (and, for GCE, from the fake), while
// converging and over one poll interval of steady state. In the same run a
// baseline program creates the same backend objects with the raw client
// (client-go, the compute client, go-libvirt) and is timed to the same
// condition, so each figure comes with ours/baseline. kubernetes adds a
// server-side apply baseline (the same objects applied, then applied again
// unchanged, as a poll) and the kube-apiserver's CPU in each phase.
//
// After each backend's run it measures the backend's data plane, the
// proxy overhead (overhead.go): real squid with the configuration the
// backend renders, its flags and its access log path, against the same
// origin directly, in a network namespace of its own. -n 0 runs only that.
//
//	go run ./hack/bench -n 200 -backends kubernetes,gcp,kvm
//	go run ./hack/bench -n 0 -overhead-for 3s
//
// It prints figures; it asserts nothing. Its exit code says only whether
// the run itself worked.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

const errFmtBackend = "unknown backend %q (kubernetes, gcp, kvm)"

// errMissing is wrapped by the error of a backend whose components this
// machine lacks: a skip on a laptop, a failure when CI=true (as tests do).
var errMissing = errors.New("a component is missing")

// options are the command line.
type options struct {
	n        int
	backends []string
	poll     time.Duration
	steady   time.Duration
	rate     int
	timeout  time.Duration
	keep     bool
	profile  string
	// faults adds the fault runs, each lasting faultFor.
	faults   bool
	faultFor time.Duration
	// providerFlags are added to the provider's command line.
	providerFlags []string
	// providerEnv is added to the provider's environment only: the first
	// runtimeEnv of it are the documented runtime's (runtimeenv.go).
	providerEnv []string
	runtimeEnv  int
	// peer runs provider-kubernetes side by side (kubernetes only).
	peer bool
	// baselines runs the raw-client baselines after the provider.
	baselines bool
	// overhead measures each backend's data plane (overhead.go), with
	// concurrency workers for overheadFor per cell; squidExtra are more
	// squid.conf lines, ";"-separated.
	overhead    bool
	concurrency int
	overheadFor time.Duration
	squidExtra  string
	// squidArgs replace every backend's squid flags when set.
	squidArgs []string
}

func main() {
	o := options{}
	var backends string
	flag.IntVar(&o.n, "n", 200, "managed resources per backend; 0: only the proxy overhead (-overhead)")
	flag.StringVar(&backends, "backends", strings.Join(registry.Backends.Names(), ","), "comma-separated backends to measure, in order")
	flag.DurationVar(&o.poll, "poll", time.Minute, "the provider's --poll")
	flag.DurationVar(&o.steady, "steady", 0, "steady-state window after all are Ready; 0 means one poll interval")
	flag.IntVar(&o.rate, "rate", 100, "the provider's --max-reconcile-rate, and the baseline's concurrency and client QPS (5x, as the provider's)")
	flag.DurationVar(&o.timeout, "timeout", 0, "how long one backend may take to converge; 0 means 5m + 1s per MR")
	flag.BoolVar(&o.keep, "keep", false, "keep the state folder and logs")
	flag.StringVar(&o.profile, "profile", "", "folder to write profiles to: the provider's (<backend>-converge.pprof, <backend>-steady.pprof, <backend>-heap.pprof) and the API server's while converging (<backend>-apiserver-converge.pprof); empty: none")
	flag.BoolVar(&o.faults, "faults", false, "after the steady window, break the backend (gcp: a 429/503 storm; kubernetes: the target apiserver down) and show the requests while it lasts and the time to recover")
	flag.DurationVar(&o.faultFor, "fault-for", time.Minute, "how long each fault of -faults lasts")
	flag.BoolVar(&o.peer, "peer", true, "kubernetes: also run the peer provider-kubernetes (hack/tools.sh builds it) on the same four objects per proxy as Objects, and print ours/peer")
	flag.BoolVar(&o.baselines, "baselines", true, "after the provider (and the peer), time the raw-client baselines; false: the provider's own figures only, with no ratio to a baseline")
	flag.BoolVar(&o.overhead, "overhead", true, "measure each backend's data plane: real squid with its rendered configuration against the same origin directly (requests per second, p50/p99)")
	flag.IntVar(&o.concurrency, "overhead-concurrency", 16, "-overhead: requests in flight, directly and through the proxy")
	flag.DurationVar(&o.overheadFor, "overhead-for", 10*time.Second, "-overhead: how long each cell (mode, direct or proxy) sends requests, after a warm-up of a fifth of it (at most 2s)")
	flag.StringVar(&o.squidExtra, "overhead-squid", "", "-overhead: squid.conf lines added to every backend's, ;-separated (\"workers 2\"), to try a setting")
	var squidArgs string
	flag.StringVar(&squidArgs, "overhead-squid-args", "", "-overhead: squid's flags before -f for every backend, space-separated, in place of each backend's own (\"--foreground\", which workers need)")
	var providerFlags string
	flag.StringVar(&providerFlags, "provider-flags", "", "more flags for the provider, space-separated, such as --no-normal-events")
	var providerEnv string
	flag.StringVar(&providerEnv, "provider-env", "", "more environment variables for the provider only, space-separated, such as GOGC=50; after the documented runtime's ("+runtimeFile+"), whose values they override")
	flag.Parse()
	// The documented runtime's environment first: -provider-env may
	// override it (the last of a name wins).
	renv, err := documentedRuntimeEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	o.runtimeEnv = len(renv)
	o.providerEnv = append(renv, strings.Fields(providerEnv)...)
	o.squidArgs = strings.Fields(squidArgs)
	o.backends = strings.Split(backends, ",")
	o.providerFlags = strings.Fields(providerFlags)
	if o.steady == 0 {
		o.steady = o.poll
	}
	if o.timeout == 0 {
		o.timeout = 5*time.Minute + time.Duration(o.n)*time.Second
	}
	// controller-runtime wants a logger; the bench's output is its tables.
	ctrl.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	for _, b := range o.backends {
		if _, ok := benches[b]; !ok {
			return errors.Errorf(errFmtBackend, b)
		}
	}
	if o.profile != "" {
		// Without it every profile was lost, one log line each.
		if err := os.MkdirAll(o.profile, 0o750); err != nil {
			return errors.Wrap(err, "cannot create the -profile folder")
		}
	}
	dir, err := os.MkdirTemp("", "egressproxy-bench-")
	if err != nil {
		return errors.Wrap(err, "cannot create the state folder")
	}
	if o.keep {
		logf("state and logs: %s", dir)
	} else {
		defer os.RemoveAll(dir) //nolint:errcheck // Best effort.
	}
	bin := ""
	if o.n > 0 {
		logf("building the provider from cmd/provider")
		if bin, err = buildProvider(ctx, dir); err != nil {
			return err
		}
	}
	extra := ""
	if len(o.providerFlags) > 0 {
		extra = " " + strings.Join(o.providerFlags, " ")
	}
	if o.runtimeEnv > 0 {
		extra += ", provider environment " + strings.Join(o.providerEnv[:o.runtimeEnv], " ") + " (" + runtimeFile + ")"
	}
	if more := o.providerEnv[o.runtimeEnv:]; len(more) > 0 {
		extra += ", provider environment " + strings.Join(more, " ")
	}
	fmt.Printf("# make bench: %s, N=%d, --poll=%s, --max-reconcile-rate=%d%s, steady window %s, %d CPUs, load average %s\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), o.n, o.poll, o.rate, extra, o.steady, numCPU(), loadAvg())
	var failed []string
	var ob *overheadBench
	if o.overhead {
		ob, err = newOverheadBench(ctx, o)
		switch {
		case !report("proxy overhead", err):
			// The control plane's figures still come.
			failed = append(failed, "proxy overhead")
		case ob != nil:
			defer ob.stop()
		}
	}
	for _, b := range o.backends {
		if o.n > 0 {
			r := &runner{o: o, providerBin: bin, dir: filepath.Join(dir, b), backend: b}
			res, err := r.run(ctx, benches[b])
			if !report(b, err) {
				failed = append(failed, b)
			}
			if res != nil {
				res.print(os.Stdout)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		if ob != nil {
			// After the backend's control plane stopped: the data plane
			// gets the machine.
			logf("%s: measuring the proxy overhead", b)
			res, err := ob.run(ctx, b, benches[b]().dataPlane())
			if !report(b+" (proxy overhead)", err) {
				failed = append(failed, b+" (proxy overhead)")
			}
			if res != nil {
				res.print(os.Stdout)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	if len(failed) > 0 {
		return errors.Errorf("backends failed: %s (see above)", strings.Join(failed, ", "))
	}
	return nil
}

// report logs err of what and is false when it fails the run: a missing
// component is a skip unless CI=true.
func report(what string, err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, errMissing) && !testenv.InCI():
		logf("%s: SKIPPED: %v (CI=true makes this a failure)", what, err)
		return true
	default:
		// One backend failing must not hide the figures of the others.
		logf("%s: FAILED: %v", what, err)
		return false
	}
}

// logf reports progress on stderr, so stdout holds only the tables.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
