/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// reqKey is a target (control plane, target cluster, GCE, libvirt) and a
// verb (GET, PATCH, instances.insert, ...).
type reqKey struct{ target, verb string }

// counts are requests by target and verb.
type counts map[reqKey]float64

// reconciles is the pseudo target of the managed controllers' reconciles
// (controller_runtime_reconcile_total by result): not requests, so no total
// counts them, but the table shows what drove the requests.
const reconciles = "reconciles (not requests):"

func (c counts) total() float64 {
	t := 0.0
	for k, v := range c {
		if k.target != reconciles {
			t += v
		}
	}
	return t
}

// backend are the requests to the backend: all but the control plane's.
func (c counts) backend() counts {
	out := counts{}
	for k, v := range c {
		if k.target != controlPlane && k.target != reconciles {
			out[k] = v
		}
	}
	return out
}

// writes are the requests to target that change something.
func (c counts) writes(target string) float64 {
	w := 0.0
	for k, v := range c {
		if k.target == target && k.verb != "GET" && k.verb != "LIST" && k.verb != "WATCH" {
			w += v
		}
	}
	return w
}

func (c counts) minus(o counts) counts {
	out := counts{}
	for k, v := range c {
		if d := v - o[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// counter counts a baseline's requests; safe for concurrent use.
type counter struct {
	mu sync.Mutex
	c  counts
}

func (c *counter) inc(target, verb string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		c.c = counts{}
	}
	c.c[reqKey{target: target, verb: verb}]++
}

func (c *counter) snapshot() counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.c)
}

// baselineResult is the raw client's run.
type baselineResult struct {
	// what it creates per MR, and the condition ready stands for.
	what, readyMeans string
	exist, ready     time.Duration
	cpu              float64
	requests         counts
	// cpuExist is the bench process's CPU until every object exists;
	// apiExist and apiReady are the kube-apiserver's CPU until every object
	// exists and until ready (kubernetes only).
	cpuExist           float64
	apiExist, apiReady float64
	// ssa is the server-side apply baseline (kubernetes only).
	ssa *ssaResult
	// contract is the contract baseline (kubernetes only).
	contract *contractResult
}

// result is one backend's figures.
type result struct {
	backend       string
	n             int
	poll          time.Duration
	synced, ready time.Duration
	// settled is how long after all Ready the control plane's writes went
	// on (events still being sent); they count as converging.
	settled     time.Duration
	cpuSynced   float64
	cpuConverge float64
	cpuSteady   float64
	// apiSynced, apiConverge and apiSteady are the kube-apiserver's CPU
	// from the provider's start until all Synced, until all Ready, and over
	// the steady window.
	apiSynced, apiConverge, apiSteady float64
	steadyPolls                       float64
	mem                               memKiB
	converge, steady                  counts
	base                              *baselineResult
	loadBefore, loadAfter             string
	// opsNotRPCs: the provider's backend figure is operations, not requests.
	opsNotRPCs bool
	note       string
	// faults are the fault runs of -faults.
	faults []faultResult
	// peer is provider-kubernetes' run (kubernetes, -peer).
	peer *peerResult
}

func (r *result) print(w io.Writer) {
	n := float64(r.n)
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	p("\n## %s, N=%d (load average %s before, %s after)\n\n", r.backend, r.n, r.loadBefore, r.loadAfter)
	if r.note != "" {
		p("not complete: %s\n\n", r.note)
	}
	b := r.base
	if b == nil {
		b = &baselineResult{}
	}
	p("| figure | provider | baseline | ours/baseline |\n|---|---|---|---|\n")
	p("| time to all Synced (baseline: every object created) | %s | %s | %s |\n", secs(r.synced), secs(b.exist), ratio(r.synced.Seconds(), b.exist.Seconds()))
	p("| time to all Ready (baseline: %s) | %s | %s | %s |\n", orDash(b.readyMeans), secs(r.ready), secs(b.ready), ratio(r.ready.Seconds(), b.ready.Seconds()))
	p("| control-plane writes settled after all Ready (they count as converging) | %s | | |\n", secs(r.settled))
	p("| CPU until all Synced | %s | | |\n", cpu(r.cpuSynced))
	p("| CPU until all Ready (baseline: bench process) | %s | %s | %s |\n", cpu(r.cpuConverge), cpu(b.cpu), ratio(r.cpuConverge, b.cpu))
	p("| peak RSS | %s | | |\n", mib(r.mem.peak))
	if r.mem.anon+r.mem.file > 0 {
		p("| RSS after the steady window: anonymous (heap, stacks) + file (the binary's pages) | %s + %s | | |\n", mib(r.mem.anon), mib(r.mem.file))
	}
	p("| requests per MR while converging, all | %s | %s | %s |\n", num(r.converge.total()/n), num(b.requests.total()/n), ratio(r.converge.total(), b.requests.total()))
	backendRatio := ratio(r.converge.backend().total(), b.requests.total())
	if r.opsNotRPCs {
		// The provider's libvirt figure counts backend operations, the
		// baseline's RPCs: no ratio.
		backendRatio = "n/a (ops vs RPCs)"
	}
	p("| requests per MR while converging, backend only | %s | %s | %s |\n", num(r.converge.backend().total()/n), num(b.requests.total()/n), backendRatio)
	if r.steadyPolls > 0 {
		p("| steady state: requests per MR per poll | %s | | |\n", num(r.steady.total()/n/r.steadyPolls))
		p("| steady state: CPU per MR per poll | %.2f ms | | |\n", 1000*r.cpuSteady/n/r.steadyPolls)
	}
	if b.what != "" {
		p("\nbaseline: %s.\n", b.what)
	}
	p("\n| requests per MR, by target and verb | converging | steady, per poll | baseline |\n|---|---|---|---|\n")
	for _, k := range sortedKeys(r.converge, r.steady, b.requests) {
		steady := "-"
		if r.steadyPolls > 0 {
			steady = num(r.steady[k] / n / r.steadyPolls)
		}
		p("| %s %s | %s | %s | %s |\n", k.target, k.verb, num(r.converge[k]/n), steady, num(b.requests[k]/n))
	}
	if b.ssa != nil {
		r.printSSA(w, b, b.ssa)
	}
	if b.contract != nil {
		r.printContract(w, b, b.contract)
	}
	for _, f := range r.faults {
		f.print(w, r.n)
	}
	if r.peer != nil {
		r.printPeer(w, r.peer)
	}
}

// printSSA compares the provider (its hand-written compare against the
// watch cache) with the POST baseline and the server-side apply baseline.
// The apiserver's CPU is the whole kube-apiserver process's over the phase:
// kube-controller-manager, kube-scheduler, kwok and the bench's polls load
// it too.
func (r *result) printSSA(w io.Writer, b *baselineResult, s *ssaResult) {
	n := float64(r.n)
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	row := func(figure, ours, post, ssa string, o, pb, sb float64) {
		p("| %s | %s | %s | %s | %s | %s |\n", figure, ours, post, ssa, ratio(o, sb), ratio(sb, pb))
	}
	p("\nserver-side apply baseline: %s. apiserver CPU is the whole kube-apiserver's over the phase: kube-controller-manager, kube-scheduler, kwok and the bench's polls load it too.\n\n", s.what)
	p("| figure | provider | POST baseline | SSA baseline | ours/SSA | SSA/POST |\n|---|---|---|---|---|---|\n")
	row("time to all exist (provider: all Synced)", secs(r.synced), secs(b.exist), secs(s.exist), r.synced.Seconds(), b.exist.Seconds(), s.exist.Seconds())
	row("time to all Ready (baselines: every Deployment available)", secs(r.ready), secs(b.ready), secs(s.ready), r.ready.Seconds(), b.ready.Seconds(), s.ready.Seconds())
	row("CPU until all exist (provider: all Synced; baselines: bench process)", cpu(r.cpuSynced), cpu(b.cpuExist), cpu(s.cpuExist), r.cpuSynced, b.cpuExist, s.cpuExist)
	row("CPU until all Ready (baselines: bench process)", cpu(r.cpuConverge), cpu(b.cpu), cpu(s.cpu), r.cpuConverge, b.cpu, s.cpu)
	row("apiserver CPU until all exist (provider: from its start until all Synced)", cpu(r.apiSynced), cpu(b.apiExist), cpu(s.apiExist), r.apiSynced, b.apiExist, s.apiExist)
	row("apiserver CPU until all Ready", cpu(r.apiConverge), cpu(b.apiReady), cpu(s.apiReady), r.apiConverge, b.apiReady, s.apiReady)
	oc, bc, sc := r.converge.backend().total(), b.requests.total(), s.create.total()
	row("target-cluster requests per MR while converging (SSA: create)", num(oc/n), num(bc/n), num(sc/n), oc, bc, sc)
	if r.steadyPolls > 0 {
		st := r.steady.backend().total() / r.steadyPolls
		row("steady state: target-cluster requests per MR per poll (SSA: the re-apply, unchanged)", num(st/n), "", num(s.reapply.total()/n), st, 0, s.reapply.total())
		oa := r.apiSteady / r.steadyPolls
		row("steady state: apiserver CPU per MR per poll (whole apiserver over one poll; SSA: the poll holds the re-apply)", ms(oa/n), "", ms(s.pollAPI/n), oa, 0, s.pollAPI)
	}
	row("SSA re-apply pass alone: wall time", "", "", secs(s.reapplyTime), 0, 0, 0)
	row("SSA re-apply pass alone: apiserver CPU per MR", "", "", ms(s.reapplyAPI/n), 0, 0, 0)
	p("| SSA re-apply: objects the apiserver wrote (resourceVersion moved) | | | %d of %d | | |\n", s.changed, s.objects)
	p("\n| requests per MR, by target and verb | SSA create | SSA re-apply |\n|---|---|---|\n")
	for _, k := range sortedKeys(s.create, s.reapply) {
		p("| %s %s | %s | %s |\n", k.target, k.verb, num(s.create[k]/n), num(s.reapply[k]/n))
	}
}

// printContract compares the provider's time to all Synced with the writes
// its contract asks for, made by a plain program: what is left between the
// two is the provider's own cost (reads, caches, watches, deciding).
func (r *result) printContract(w io.Writer, b *baselineResult, c *contractResult) {
	n := float64(r.n)
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	row := func(figure, ours, post, con string, o, pb, cb float64) {
		p("| %s | %s | %s | %s | %s | %s |\n", figure, ours, post, con, ratio(o, cb), ratio(cb, pb))
	}
	p("\ncontract baseline: %s.\n\n", c.what)
	p("| figure | provider | POST baseline | contract baseline | ours/contract | contract/POST |\n|---|---|---|---|---|---|\n")
	row("time to all Synced (POST baseline: every object created)", secs(r.synced), secs(b.exist), secs(c.exist), r.synced.Seconds(), b.exist.Seconds(), c.exist.Seconds())
	row("CPU until all Synced (baselines: bench process)", cpu(r.cpuSynced), cpu(b.cpuExist), cpu(c.cpuExist), r.cpuSynced, b.cpuExist, c.cpuExist)
	row("apiserver CPU until all Synced", cpu(r.apiSynced), cpu(b.apiExist), cpu(c.apiExist), r.apiSynced, b.apiExist, c.apiExist)
	p("\n| requests per MR until all Synced, by target and verb | contract baseline |\n|---|---|\n")
	for _, k := range sortedKeys(c.requests) {
		p("| %s %s | %s |\n", k.target, k.verb, num(c.requests[k]/n))
	}
}

// sortedKeys are the keys of every cs, by target and verb.
func sortedKeys(cs ...counts) []reqKey {
	keys := map[reqKey]bool{}
	for _, c := range cs {
		for k := range c {
			keys[k] = true
		}
	}
	return slices.SortedFunc(maps.Keys(keys), func(a, b reqKey) int {
		return strings.Compare(a.target+" "+a.verb, b.target+" "+b.verb)
	})
}

func secs(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < 10*time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func cpu(s float64) string {
	switch {
	case s == 0:
		return "-"
	case s < 10:
		return fmt.Sprintf("%.2f s", s)
	}
	return fmt.Sprintf("%.1f s", s)
}

func mib(kib int64) string {
	if kib == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MiB", float64(kib)/1024)
}

// ms is seconds s in milliseconds; /proc counts CPU in 10 ms ticks.
func ms(s float64) string {
	if s == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f ms", 1000*s)
}

func num(v float64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%.2f", v)
}

func ratio(ours, base float64) string {
	if ours == 0 || base == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", ours/base)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
