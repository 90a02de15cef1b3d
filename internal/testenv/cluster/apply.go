/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// FieldOwner is the field manager of everything Start and ApplyYAML apply.
const FieldOwner = "egressproxy-testenv"

const (
	errFmtRead      = "cannot read %s"
	errFmtDecode    = "cannot decode %s"
	errFmtApply     = "cannot apply %s %s"
	errFmtGlobFiles = "cannot list %s"
)

// Decode returns the objects of a YAML stream of one or more documents.
func Decode(name string, data []byte) ([]*unstructured.Unstructured, error) {
	d := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := d.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, errors.Wrapf(err, errFmtDecode, name)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// Apply server-side applies objects, forcing ownership of their fields.
func Apply(ctx context.Context, c client.Client, objs ...*unstructured.Unstructured) error {
	for _, u := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return errors.Wrapf(err, errFmtApply, u.GetKind(), u.GetName())
		}
	}
	return nil
}

// ApplyYAML applies the objects of a YAML stream.
func (c *Cluster) ApplyYAML(ctx context.Context, name string, data []byte) error {
	objs, err := Decode(name, data)
	if err != nil {
		return err
	}
	return Apply(ctx, c.Client, objs...)
}

// ApplyFile applies the objects of a YAML file.
func (c *Cluster) ApplyFile(ctx context.Context, path string) error {
	b, err := os.ReadFile(path) //nolint:gosec // Paths come from the test or make dev, not from users.
	if err != nil {
		return errors.Wrapf(err, errFmtRead, path)
	}
	return c.ApplyYAML(ctx, filepath.Base(path), b)
}

// ConfigurationFiles are the XRDs and Compositions of package/configuration
// (the claim API) and package/configuration-namespaced (the namespaced XR
// API): every YAML file but the packages' meta files crossplane.yaml.
func ConfigurationFiles() ([]string, error) {
	var files []string
	for _, pkg := range []string{"configuration", "configuration-namespaced"} {
		dir := filepath.Join(testenv.RepoRoot(), "package", pkg)
		f, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return nil, errors.Wrapf(err, errFmtGlobFiles, dir)
		}
		files = append(files, f...)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "crossplane.yaml" })
	// The XRD first, so the Compositions' type exists when they arrive.
	slices.SortStableFunc(files, func(a, b string) int {
		return boolInt(!strings.Contains(filepath.Base(a), "xrd")) - boolInt(!strings.Contains(filepath.Base(b), "xrd"))
	})
	return files, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// HasCondition reports whether an object has a status condition of a type
// with a status.
func HasCondition(u *unstructured.Unstructured, typ, status string) bool {
	c, ok := Condition(u, typ)
	return ok && c["status"] == status
}

// Condition returns a status condition of an object by its type.
func Condition(u *unstructured.Unstructured, typ string) (map[string]any, bool) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ {
			return m, true
		}
	}
	return nil, false
}
