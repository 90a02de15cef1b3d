/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package e2e runs EgressProxy claims end to end on a real Crossplane: a
// local control plane (internal/testenv/cluster) with Crossplane core, whose
// package manager installs the Configurations, the Provider and the
// Function from a registry on loopback, and the backends' test doubles.
//
//	go test ./test/e2e/ -v            # all of it, with phase timings
//	go test ./test/e2e/ -v -args -ginkgo.focus=kubernetes
//	E2E_KEEP=1 ...                    # keep the state folder and logs
//	E2E_DEBUG=1 ...                   # debug logs of Crossplane, function, provider
package e2e

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega" //nolint:revive // Gomega's matchers too.
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// suiteBudget bounds the whole suite; go test's -timeout, less 30 s, when
// that is shorter: Ginkgo then stops it and still runs the cleanup that
// stops every process, where a go test timeout would kill the binary
// without cleanup. Real KVM guests boot under TCG (three boots of one
// claim, then a claim per backend at once for the upgrade), and each backend
// also counts traffic and applies changes under load, so run it with
// -timeout 40m (make e2e).
const suiteBudget = 37 * time.Minute

// env is what every spec shares: the control plane and what runs on it.
// Specs run in order in one process, so a package-level value is safe here.
var env struct {
	c *cluster.Cluster
	// skipped are backends not built into the provider: skipped anywhere.
	skipped map[cluster.Backend]string
	// missing are backends this machine cannot run: skipped, but a
	// failure when CI=true.
	missing map[cluster.Backend]string
	start   time.Time
	phases  []phase
	// failed is set when a spec failed: the logs are kept then.
	failed bool
}

// A phase is a timed part of a spec, reported at the end of the suite.
type phase struct {
	name string
	d    time.Duration
}

func TestE2E(t *testing.T) {
	if e := undescribed(); len(e) > 0 {
		t.Fatal(strings.Join(e, "\n"))
	}
	if kube.BinDir() == "" {
		testenv.Missing(t, "the envtest binaries are not built (hack/tools.sh build etcd kube-apiserver kubectl)")
	}
	if _, missing := cluster.FindTools(); len(missing) > 0 {
		testenv.Missing(t, "%s not built (hack/tools.sh build %s)", strings.Join(missing, ", "), strings.Join(missing, " "))
	}
	RegisterFailHandler(Fail)
	sc, rc := GinkgoConfiguration()
	sc.Timeout = suiteBudget
	if d, ok := t.Deadline(); ok && time.Until(d)-30*time.Second < sc.Timeout {
		sc.Timeout = time.Until(d) - 30*time.Second
	}
	RunSpecs(t, "EgressProxy end to end", sc, rc)
}

var _ = BeforeSuite(func(ctx SpecContext) {
	env.start = time.Now()
	ctrllog.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	backends := chooseBackends()
	dir := ""
	if os.Getenv("E2E_KEEP") != "" {
		var err error
		dir, err = os.MkdirTemp("", "egressproxy-e2e-")
		Expect(err).NotTo(HaveOccurred())
	}
	c, err := cluster.Start(ctx, cluster.Options{
		Dir:      dir,
		Backends: backends,
		Debug:    os.Getenv("E2E_DEBUG") != "",
		Logf: func(f string, a ...any) {
			GinkgoWriter.Printf("[cluster %5.1fs] "+f+"\n", append([]any{time.Since(env.start).Seconds()}, a...)...)
		},
	})
	if errors.Is(err, cluster.ErrMissing) && !testenv.InCI() {
		// No real node here (root, containerd, the images): Crossplane
		// and the packages run as pods, so nothing of the suite can run.
		Skip("no cluster can run here: " + err.Error())
	}
	Expect(err).NotTo(HaveOccurred(), "bringing up the local control plane")
	env.c = c
	for b, why := range c.Unavailable {
		env.missing[b] = why
	}
	for _, t := range c.Timings {
		env.phases = append(env.phases, phase{name: "bring-up: " + t.Step, d: t.Duration})
	}
	DeferCleanup(func() {
		if env.failed || os.Getenv("E2E_KEEP") != "" {
			c.Keep()
			fmt.Printf("state and the log of every process are kept in %s\n", c.Dir)
		}
		t := time.Now()
		c.Stop()
		env.phases = append(env.phases, phase{name: "teardown", d: time.Since(t)})
	})
	// A cold Go build cache makes building the provider take minutes.
}, NodeTimeout(8*time.Minute))

// chooseBackends returns the backends to set up, and records why the others
// are skipped.
func chooseBackends() []cluster.Backend {
	wired, err := cluster.WiredBackends()
	Expect(err).NotTo(HaveOccurred())
	env.skipped, env.missing = map[cluster.Backend]string{}, map[cluster.Backend]string{}
	var out []cluster.Backend
	for _, b := range cluster.Backends() {
		why := cluster.CannotRun(b)
		switch {
		case !wired[b]:
			env.skipped[b] = fmt.Sprintf("the %s backend is not wired in cmd/provider/backends.go yet", b)
		case why != "":
			env.missing[b] = why
		default:
			out = append(out, b)
		}
	}
	return out
}

// described are the backends whose specs describeBackend registered: each
// backend's file of this package registers its own.
var described = map[cluster.Backend]bool{}

// TestEveryBackendDescribed fails when a backend of the provider has no
// specs in this suite (a file of its own with var _ =
// describeBackend(backendCase{...}), which also describes its namespaced
// XR, and var _ = registerHealth(...)), or specs are registered for a
// backend the provider does not have: the suite iterates the provider's
// backends, so a new one would otherwise silently go untested. TestE2E
// checks the same first.
func TestEveryBackendDescribed(t *testing.T) {
	for _, e := range undescribed() {
		t.Error(e)
	}
}

func undescribed() []string {
	var out []string
	all := cluster.Backends()
	for _, b := range all {
		if !described[b] {
			out = append(out, fmt.Sprintf("the %s backend has no end-to-end specs: add test/e2e/%s_test.go with var _ = describeBackend(backendCase{backend: ...})", b, b))
		}
	}
	for _, b := range all {
		if !slices.ContainsFunc(healthCases, func(hc healthCase) bool { return hc.backend == b }) {
			out = append(out, fmt.Sprintf("the %s backend has no health case: add var _ = registerHealth(healthCase{backend: ...}) to test/e2e/%s_test.go", b, b))
		}
	}
	for b := range described {
		if !slices.Contains(all, b) {
			out = append(out, fmt.Sprintf("end-to-end specs are registered for %q, which is no backend of the provider (internal/backend/registry)", b))
		}
	}
	return out
}

var _ = ReportAfterEach(func(r SpecReport) {
	env.failed = env.failed || r.Failed()
})

var _ = ReportAfterSuite("timings", func(r Report) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nEgressProxy e2e: %s in total\n", r.RunTime.Round(100*time.Millisecond))
	for _, p := range env.phases {
		fmt.Fprintf(&b, "  %-60s %8s\n", p.name, p.d.Round(10*time.Millisecond))
	}
	for _, s := range r.SpecReports {
		if s.LeafNodeType == types.NodeTypeIt && s.State != types.SpecStateSkipped {
			fmt.Fprintf(&b, "  spec %-55s %8s %s\n", trim(s.FullText(), 55), s.RunTime.Round(10*time.Millisecond), s.State)
		}
	}
	_, _ = fmt.Fprint(os.Stdout, b.String())
})

// timed runs fn as a named phase of the suite's timing report.
func timed(name string, fn func()) {
	t := time.Now()
	defer func() { env.phases = append(env.phases, phase{name: name, d: time.Since(t)}) }()
	By(name)
	fn()
}

// skipUnless skips the specs of a backend that is not set up here, or
// fails them when CI=true and the machine cannot run the backend.
func skipUnless(b cluster.Backend) {
	if why, ok := env.skipped[b]; ok {
		Skip(why)
	}
	if why, ok := env.missing[b]; ok {
		if testenv.InCI() {
			Fail(fmt.Sprintf("CI=true but the %s backend cannot run here: %s", b, why))
		}
		Skip(why + " (CI=true turns this into a failure)")
	}
}

// skipWithoutNode skips a spec that needs the real node where none runs,
// or fails it when CI=true.
func skipWithoutNode() {
	if env.c.Node == nil {
		if testenv.InCI() {
			Fail("CI=true but no real node runs here: " + env.c.NoRealNode)
		}
		Skip("no real node here: " + env.c.NoRealNode)
	}
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
