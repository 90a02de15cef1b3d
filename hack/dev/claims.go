/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

const (
	errFmtNotReady = "claim %s/%s is not Ready after %s: %s (the trace above shows which resource is not; logs: %s)"
	errFmtExample  = "cannot apply example %s"
)

// A claim that make dev applied.
type claim struct {
	backend cluster.Backend
	name    string
}

// applyExamples applies examples/composition/claim-<backend>.yaml of each
// backend, and every other file there (the credentials Secret), into ns.
func applyExamples(ctx context.Context, c *cluster.Cluster, p *printer, ns string, backends []cluster.Backend) ([]claim, error) {
	var claims []claim
	err := c.Step(ctx, "example claims in namespace "+ns, "", func(ctx context.Context) error {
		if err := c.ApplyYAML(ctx, "namespace", []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n")); err != nil {
			return err
		}
		files, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), "examples", "composition", "*.yaml"))
		for _, f := range files {
			base := strings.TrimSuffix(filepath.Base(f), ".yaml")
			b, isClaim := strings.CutPrefix(base, "claim-")
			if isClaim && !slices.Contains(backends, cluster.Backend(b)) {
				continue
			}
			objs, err := readObjects(f, ns)
			if err != nil {
				return err
			}
			for _, o := range objs {
				if o.GroupVersionKind() == cluster.ClaimGVK() {
					allowTraffic(c, cluster.Backend(b), o)
				}
			}
			if err := cluster.Apply(ctx, c.Client, objs...); err != nil {
				return errors.Wrapf(err, errFmtExample, f)
			}
			for _, o := range objs {
				if o.GroupVersionKind() == cluster.ClaimGVK() {
					claims = append(claims, claim{backend: cluster.Backend(b), name: o.GetName()})
					p.logf("  applied %s claim %s/%s", b, ns, o.GetName())
				}
			}
		}
		return nil
	})
	return claims, err
}

// readObjects reads a YAML file's objects and puts namespaced ones in ns.
func readObjects(path, ns string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path) //nolint:gosec // Files of this repository.
	if err != nil {
		return nil, err
	}
	objs, err := cluster.Decode(filepath.Base(path), b)
	for _, o := range objs {
		if o.GetNamespace() != "" {
			o.SetNamespace(ns)
		}
	}
	return objs, err
}

// waitReady waits until every claim is Ready, and says which is not.
func waitReady(ctx context.Context, c *cluster.Cluster, p *printer, ns string, claims []claim, timeout time.Duration) error {
	for _, cl := range claims {
		var last string
		err := c.Step(ctx, fmt.Sprintf("%s claim %s Ready", cl.backend, cl.name), "", func(ctx context.Context) error {
			return wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
				u, err := c.Get(ctx, cluster.ClaimGVK(), ns, cl.name)
				if err != nil {
					return false, client.IgnoreNotFound(err)
				}
				last = conditionSummary(u)
				return cluster.HasCondition(u, "Ready", "True"), nil
			})
		})
		if err != nil {
			out, _ := c.Trace(ctx, ns, cl.name, "-o", "wide")
			fmt.Println(out)
			return errors.Errorf(errFmtNotReady, ns, cl.name, timeout, last, c.LogDir)
		}
	}
	return nil
}

// conditionSummary is "Synced=True Ready=False (reason: message)".
func conditionSummary(u *unstructured.Unstructured) string {
	var parts []string
	for _, t := range []string{"Synced", "Ready"} {
		c, ok := cluster.Condition(u, t)
		if !ok {
			continue
		}
		s := fmt.Sprintf("%s=%v", t, c["status"])
		if c["status"] != "True" {
			s += fmt.Sprintf(" (%v: %v)", c["reason"], c["message"])
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// report prints the trace of each claim and the keys of its connection
// Secret; never the values, which hold the proxy's password.
func report(ctx context.Context, c *cluster.Cluster, ns string, claims []claim) {
	for _, cl := range claims {
		fmt.Printf("\n[dev] crossplane beta trace egressproxyclaim %s -n %s\n", cl.name, ns)
		out, err := c.Trace(ctx, ns, cl.name, "-o", "wide")
		fmt.Print(out)
		if err != nil {
			fmt.Printf("  (%v)\n", err)
		}
		u, err := c.Get(ctx, cluster.ClaimGVK(), ns, cl.name)
		if err != nil {
			continue
		}
		fmt.Printf("  endpoint %v, egress IP %v\n", nested(u, "status", "endpoint"), nested(u, "status", "egressIP"))
		name := nested(u, "spec", "writeConnectionSecretToRef", "name")
		s := &corev1.Secret{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			fmt.Printf("  connection Secret %s/%s: %v\n", ns, name, err)
			if xr, err := c.Get(ctx, cluster.CompositeGVK(), "", nested(u, "spec", "resourceRef", "name")); err == nil &&
				nested(xr, "spec", "writeConnectionSecretToRef", "name") == "" {
				fmt.Printf("  (the XR has no writeConnectionSecretToRef: its Composition %s must set spec.writeConnectionSecretsToNamespace)\n",
					nested(xr, "spec", "compositionRef", "name"))
			}
			continue
		}
		keys := make([]string, 0, len(s.Data))
		for k := range s.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		fmt.Printf("  connection Secret %s/%s keys: %s\n", ns, name, strings.Join(keys, ", "))
	}
}

func nested(u *unstructured.Unstructured, path ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, path...)
	return s
}

// A printer prints progress with the time since make dev started.
type printer struct{ start time.Time }

func newPrinter() *printer { return &printer{start: time.Now()} }

func (p *printer) since() time.Duration { return time.Since(p.start).Round(100 * time.Millisecond) }

func (p *printer) logf(format string, args ...any) {
	fmt.Printf("[dev %6.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

func (p *printer) timings(ts []cluster.Timing) {
	fmt.Println("\n[dev] step timings:")
	for _, t := range ts {
		fmt.Printf("  %-45s %8s\n", t.Step, t.Duration)
	}
}
