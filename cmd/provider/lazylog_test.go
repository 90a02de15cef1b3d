/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"errors"
	"io"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestLazyValues shows that a logger with lazy values logs what the plain
// one does, callers included, and that loggers derived from one another
// keep their own values.
func TestLazyValues(t *testing.T) {
	cases := map[string]func(l logr.Logger){
		"Info": func(l logr.Logger) {
			l.WithValues("request", "team-a/web").WithValues("uid", "1234").Info("observed", "ready", true)
		},
		"Error": func(l logr.Logger) {
			l.WithName("kubernetesproxy").WithValues("request", "team-a/web").Error(errors.New("boom"), "cannot observe")
		},
		"Debug": func(l logr.Logger) {
			l.WithValues("request", "team-a/web").V(1).Info("not logged at level 0")
		},
		"Siblings": func(l logr.Logger) {
			base := l.WithValues("a", 1)
			one, two := base.WithValues("b", 2), base.WithValues("c", 3)
			one.Info("one")
			two.Info("two")
			base.Info("base")
		},
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			record := func(wrap func(logr.Logger) logr.Logger) []string {
				var out []string
				l := funcr.New(func(prefix, args string) { out = append(out, prefix+" "+args) }, funcr.Options{LogCaller: funcr.All})
				run(wrap(l))
				return out
			}
			want := record(func(l logr.Logger) logr.Logger { return l })
			got := record(withLazyValues)
			if len(want) == 0 && name != "Debug" {
				t.Fatal("the plain logger logged nothing")
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("-plain, +lazy:\n%s", diff)
			}
		})
	}
}

func BenchmarkLazyValues(b *testing.B) {
	for name, wrap := range map[string]func(logr.Logger) logr.Logger{
		"Plain": func(l logr.Logger) logr.Logger { return l },
		"Lazy":  withLazyValues,
	} {
		b.Run(name, func(b *testing.B) {
			l := wrap(zap.New(zap.WriteTo(io.Discard)))
			for b.Loop() {
				l.WithValues("request", "team-a/web").WithValues("uid", "1234", "version", "42").V(1).Info("not logged")
			}
		})
	}
}
