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
}

// result is one backend's figures.
type result struct {
	backend               string
	n                     int
	poll                  time.Duration
	synced, ready         time.Duration
	cpuSynced             float64
	cpuConverge           float64
	cpuSteady             float64
	steadyPolls           float64
	peakRSSKiB            int64
	converge, steady      counts
	base                  *baselineResult
	loadBefore, loadAfter string
	// opsNotRPCs: the provider's backend figure is operations, not requests.
	opsNotRPCs bool
	note       string
	// faults are the fault runs of -faults.
	faults []faultResult
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
	p("| CPU until all Synced | %s | | |\n", cpu(r.cpuSynced))
	p("| CPU until all Ready (baseline: bench process) | %s | %s | %s |\n", cpu(r.cpuConverge), cpu(b.cpu), ratio(r.cpuConverge, b.cpu))
	p("| peak RSS | %s | | |\n", mib(r.peakRSSKiB))
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
	for _, f := range r.faults {
		f.print(w, r.n)
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
