/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

// The secret scan: every secret value the run used (generated proxy
// passwords, the GCE service account key, kubeconfig keys and tokens, libvirt
// credentials) must appear in no log line, event, status or metric. Secrets
// come and go with the specs (a deleted claim takes its connection Secret),
// so values and statuses are collected after every spec and scanned once at
// the end, when every log is complete.

// minSecretLen keeps short values (a port, "true") out of the scan: they are
// not secrets and would match by chance.
const minSecretLen = 8

// secretKey matches the names of Secret keys, and of fields inside a
// structured value (a kubeconfig, a service account key), that hold a secret.
var secretKey = regexp.MustCompile(`(?i)(password|passwd|token|secret|private_key|key-data|credential|key$)`)

var scan = struct {
	sync.Mutex
	values   map[string]string // value → where it was found
	statuses []string          // JSON of every status seen
}{values: map[string]string{}}

var _ = AfterEach(func(ctx SpecContext) {
	if env.c == nil {
		return
	}
	collectSecretValues(ctx)
	collectStatuses(ctx)
})

var _ = AfterSuite(func(ctx SpecContext) {
	if env.c == nil {
		return
	}
	collectSecretValues(ctx)
	collectStatuses(ctx)
	hay := haystacks(ctx)
	scan.Lock()
	defer scan.Unlock()
	var hits []string
	for v, where := range scan.values {
		for name, text := range hay {
			if strings.Contains(text, v) {
				hits = append(hits, fmt.Sprintf("a secret value of %s appears in %s", where, name))
			}
		}
	}
	sort.Strings(hits)
	logs, events, statuses, metrics := 0, 0, 0, 0
	for name := range hay {
		switch {
		case strings.HasPrefix(name, "log "):
			logs++
		case strings.HasPrefix(name, "event "):
			events++
		case strings.HasPrefix(name, "status "):
			statuses++
		case strings.HasPrefix(name, "metrics "):
			metrics++
		}
	}
	_, _ = fmt.Fprintf(os.Stdout, "secret scan: %d secret values in %d log files, %d events, %d status snapshots, %d metrics pages: %d hits\n",
		len(scan.values), logs, events, statuses, metrics, len(hits))
	Expect(scan.values).NotTo(BeEmpty(), "the scan found no secret value to look for: it would prove nothing")
	Expect(hits).To(BeEmpty(), "secrets leaked (values not shown)")
})

// collectSecretValues adds the secret values of every Secret in the cluster.
func collectSecretValues(ctx context.Context) {
	l := &corev1.SecretList{}
	if err := env.c.Client.List(ctx, l); err != nil {
		GinkgoWriter.Printf("secret scan: cannot list Secrets: %v\n", err)
		return
	}
	scan.Lock()
	defer scan.Unlock()
	for _, s := range l.Items {
		if s.Type == corev1.SecretTypeServiceAccountToken {
			continue
		}
		for k, v := range s.Data {
			for _, sv := range secretValues(k, v) {
				scan.values[sv] = fmt.Sprintf("Secret %s/%s key %s", s.Namespace, s.Name, k)
			}
		}
	}
}

// secretValues returns what in one Secret key is secret: the whole value
// unless it is a certificate, and the secret fields of a structured value.
func secretValues(key string, v []byte) []string {
	var out []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		if len(s) >= minSecretLen {
			out = append(out, s)
		}
	}
	s := string(v)
	switch {
	case strings.HasPrefix(s, "-----BEGIN CERTIFICATE"):
		// Public: certificates are in logs and statuses by design.
		return nil
	case strings.HasPrefix(strings.TrimSpace(s), "{"):
		m := map[string]any{}
		if json.Unmarshal(v, &m) == nil {
			for k, f := range m {
				// A key's endpoints (token_uri, ..._url) are public.
				public := strings.HasSuffix(k, "_uri") || strings.HasSuffix(k, "_url")
				if fs, ok := f.(string); ok && secretKey.MatchString(k) && !public {
					add(fs)
				}
			}
			return out
		}
	case strings.Contains(s, "apiVersion:") && strings.Contains(s, "kind: Config"):
		// A kubeconfig: its server and CA are public, its keys and tokens not.
		for _, line := range strings.Split(s, "\n") {
			k, val, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && secretKey.MatchString(k) {
				add(val)
				if dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(val)); err == nil {
					for _, l := range strings.Split(string(dec), "\n") {
						if !strings.HasPrefix(l, "-----") {
							add(l)
						}
					}
				}
			}
		}
		return out
	}
	// Other keys (endpoint, port, username, url's host) are not secret; the
	// password inside a url is scanned on its own.
	if secretKey.MatchString(key) && !strings.HasSuffix(key, ".crt") {
		add(s)
	}
	return out
}

// statusKinds are the kinds whose status the scan reads: what app and
// platform teams see.
func statusKinds() []schema.GroupVersionKind {
	gvks := []schema.GroupVersionKind{cluster.ClaimGVK(), cluster.CompositeGVK()}
	for _, b := range cluster.Backends() {
		mr := cluster.ManagedGVK(b)
		gvks = append(gvks, mr,
			schema.GroupVersionKind{Group: mr.Group, Version: mr.Version, Kind: "ProviderConfig"},
			schema.GroupVersionKind{Group: mr.Group, Version: mr.Version, Kind: "ClusterProviderConfig"})
	}
	return gvks
}

// collectStatuses keeps the status of every object of statusKinds.
func collectStatuses(ctx context.Context) {
	var got []string
	for _, gvk := range statusKinds() {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := env.c.Client.List(ctx, l); err != nil {
			continue // a kind this run does not install
		}
		for _, u := range l.Items {
			b, _ := json.Marshal(u.Object["status"])
			got = append(got, fmt.Sprintf("%s %s/%s %s", gvk.Kind, u.GetNamespace(), u.GetName(), b))
		}
	}
	scan.Lock()
	scan.statuses = append(scan.statuses, got...)
	scan.Unlock()
}

// haystacks returns every text the scan searches, by name.
func haystacks(ctx context.Context) map[string]string {
	hay := map[string]string{}
	_ = filepath.WalkDir(env.c.LogDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil //nolint:nilerr // a log that vanished has nothing to scan.
		}
		if b, err := os.ReadFile(path); err == nil { //nolint:gosec // the harness's own log folder.
			hay["log "+path] = string(b)
		}
		return nil
	})
	events := &corev1.EventList{}
	if err := env.c.Client.List(ctx, events, &client.ListOptions{}); err == nil {
		for _, e := range events.Items {
			hay[fmt.Sprintf("event %s/%s", e.Namespace, e.Name)] = e.Reason + " " + e.Message
		}
	}
	scan.Lock()
	for i, s := range scan.statuses {
		hay[fmt.Sprintf("status %d", i)] = s
	}
	scan.Unlock()
	// The logs of Crossplane's pods and of the packages' pods it runs.
	hay["pod logs "+cluster.CrossplaneNamespace] = env.c.PodLogs(ctx, cluster.CrossplaneNamespace, "", 1000000)
	if m, err := env.c.ProviderMetrics(ctx); err == nil {
		hay["metrics provider"] = m
	}
	return hay
}
