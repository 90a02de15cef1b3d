/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package admission

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// servedHere are the API groups this control plane serves: core and the
// provider's. Claims and composition objects need Crossplane itself and are
// validated by the render tests with crossplane beta validate instead.
func servedHere(apiVersion string) bool {
	return apiVersion == "v1" || strings.Contains(apiVersion, ".m.egressproxy.io/")
}

func examples(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	root := filepath.Join(testenv.RepoRoot(), "examples")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if len(u.Object) == 0 || !servedHere(u.GetAPIVersion()) {
				continue
			}
			u.SetAnnotations(map[string]string{"example-file": strings.TrimPrefix(path, root+"/")})
			out = append(out, u)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestExamplesAreAccepted(t *testing.T) {
	e := kube.Shared(t)
	objs := examples(t)
	if len(objs) < 9 {
		t.Fatalf("found %d example objects; want one per managed resource and config kind at least", len(objs))
	}
	// Namespaces first, so namespaced objects can go in.
	for _, u := range objs {
		if u.GetKind() == "Namespace" {
			e.CreateNamespace(t, u.GetName())
		}
	}
	for _, u := range objs {
		if u.GetKind() == "Namespace" {
			continue
		}
		err := e.Client.Patch(t.Context(), u, client.Apply, client.FieldOwner("examples-test"), client.ForceOwnership)
		if err != nil {
			t.Errorf("%s %s/%s from %s was rejected: %v", u.GetKind(), u.GetNamespace(), u.GetName(), u.GetAnnotations()["example-file"], err)
		}
	}
}
