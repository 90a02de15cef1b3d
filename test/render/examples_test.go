/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package render_test

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestExampleConfigAllowsCompositions: the example Kubernetes
// ClusterProviderConfig is the one getting started applies for the shipped
// Compositions, so it must allow the namespace each of them names, and the
// example KubernetesProxy that uses it must ask for an allowed one: else
// every Kubernetes claim fails with a Permanent error on the first install.
func TestExampleConfigAllowsCompositions(t *testing.T) {
	var allowed []string
	for _, d := range readDocs(t, repoPath("examples", "kubernetes", "clusterproviderconfig.yaml")) {
		ns, _ := field(d, "spec", "allowedNamespaces").([]any)
		for _, n := range ns {
			s, _ := n.(string)
			allowed = append(allowed, s)
		}
	}
	allows := func(ns string) bool { return slices.Contains(allowed, ns) || slices.Contains(allowed, "*") }

	files, err := filepath.Glob(repoPath("package", "configuration*", "composition-kubernetes.yaml"))
	if err != nil || len(files) != 2 {
		t.Fatalf("want the Kubernetes Composition of both Configurations, got %v, %v", files, err)
	}
	for _, f := range files {
		for _, d := range readDocs(t, f) {
			steps, _ := field(d, "spec", "pipeline").([]any)
			for _, s := range steps {
				ns := str(s.(map[string]any), "input", "kubernetes", "namespace")
				if ns == "" {
					t.Errorf("%s: step %s names no kubernetes.namespace", f, str(s.(map[string]any), "step"))
					continue
				}
				if !allows(ns) {
					t.Errorf("%s runs proxies in namespace %q, but examples/kubernetes/clusterproviderconfig.yaml allows only %v", f, ns, allowed)
				}
			}
		}
	}
	for _, d := range readDocs(t, repoPath("examples", "kubernetes", "kubernetesproxy.yaml")) {
		if ns := str(d, "spec", "forProvider", "namespace"); !allows(ns) {
			t.Errorf("examples/kubernetes/kubernetesproxy.yaml asks for namespace %q, but examples/kubernetes/clusterproviderconfig.yaml allows only %v", ns, allowed)
		}
	}
}
