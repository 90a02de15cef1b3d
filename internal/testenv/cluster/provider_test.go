/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestWriteOverlay checks the Configurations' overlay for this machine: the
// kubernetes Compositions of both Configurations with only the real node's
// image set (guardrails and all kept), the kvm ones with the sandbox's
// input, and no file of another backend.
func TestWriteOverlay(t *testing.T) {
	dir := t.TempDir()
	c := &Cluster{SquidImage: "egressproxy.local/squid:test"}
	if err := c.writeOverlay(dir); err != nil {
		t.Fatalf("writeOverlay: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range files {
		got[filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f)] = true
		b, err := os.ReadFile(f) //nolint:gosec // The test's own file.
		if err != nil {
			t.Fatal(err)
		}
		objs, err := Decode(f, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range objs {
			steps, _, _ := unstructured.NestedSlice(u.Object, "spec", "pipeline")
			if len(steps) != 1 {
				t.Fatalf("%s: want one pipeline step, got %d", u.GetName(), len(steps))
			}
			step, _ := steps[0].(map[string]any)
			switch b, _, _ := unstructured.NestedString(step, "input", "backend"); b {
			case string(BackendKubernetes):
				img, _, _ := unstructured.NestedString(step, "input", "kubernetes", "image")
				if diff := cmp.Diff(c.SquidImage, img); diff != "" {
					t.Errorf("%s: image: -want, +got:\n%s", u.GetName(), diff)
				}
				if _, ok, _ := unstructured.NestedMap(step, "input", "guardrails"); !ok && u.GetName() == "xegressproxies-kubernetes" {
					t.Errorf("%s: the shipped guardrails are gone", u.GetName())
				}
			case string(BackendKVM):
				in, _, _ := unstructured.NestedMap(step, "input", "kvm")
				// Decoded YAML numbers are float64.
				want := map[string]any{}
				b, _ := json.Marshal(kvmSandboxInput())
				_ = json.Unmarshal(b, &want)
				if diff := cmp.Diff(want, in); diff != "" {
					t.Errorf("%s: kvm input: -want, +got:\n%s", u.GetName(), diff)
				}
			default:
				t.Errorf("%s: backend %q needs no change here, but its file is in the overlay", u.GetName(), b)
			}
		}
	}
	want := map[string]bool{
		"configuration/composition-kubernetes.yaml": true, "configuration/composition-kvm.yaml": true,
		"configuration-namespaced/composition-kubernetes.yaml": true, "configuration-namespaced/composition-kvm.yaml": true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("overlay files: -want, +got:\n%s", diff)
	}
}
