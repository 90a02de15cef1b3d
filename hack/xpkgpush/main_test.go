/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/ociregistry"
)

func TestPush(t *testing.T) {
	r := ociregistry.Start(t, ociregistry.Options{})
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "p.xpkg")
	if err := tarball.WriteToFile(file, name.MustParseReference("example.org/p:v0"), img); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, r.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	rt, err := transport(ca, "")
	if err != nil {
		t.Fatal(err)
	}
	ref := r.Host + "/egressproxy/provider-egressproxy:v0.1.0"
	got, err := Push(t.Context(), []string{file}, ref, rt)
	if err != nil {
		t.Fatalf("Push: %v", err)
	}
	want, _ := img.Digest()
	if diff := cmp.Diff(want.String(), got); diff != "" {
		t.Errorf("Push digest: -want, +got:\n%s", diff)
	}
	parsed, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(parsed, remote.WithTransport(r.Transport()))
	if err != nil {
		t.Fatalf("pull by tag: %v", err)
	}
	pd, _ := pulled.Digest()
	if diff := cmp.Diff(want.String(), pd.String()); diff != "" {
		t.Errorf("pulled digest: -want, +got:\n%s", diff)
	}

	// Without the CA the registry's certificate is not trusted.
	plain, _ := transport("", "")
	if _, err := Push(t.Context(), []string{file}, ref, plain); err == nil {
		t.Error("Push without the CA: want a certificate error, got none")
	}
}

// TestPushIndex: the package files of several platforms go to one reference
// as an image index, each under the platform its configuration names.
func TestPushIndex(t *testing.T) {
	r := ociregistry.Start(t, ociregistry.Options{})
	dir := t.TempDir()
	var files []string
	for _, arch := range []string{"amd64", "arm64"} {
		img, err := random.Image(512, 1)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = "linux", arch
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, arch+".xpkg")
		if err := tarball.WriteToFile(f, name.MustParseReference("example.org/p:v0"), img); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	ref := r.Host + "/egressproxy/function-egressproxy:v0.1.0"
	got, err := Push(t.Context(), files, ref, r.Transport())
	if err != nil {
		t.Fatalf("Push: %v", err)
	}
	parsed, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(parsed, remote.WithTransport(r.Transport()))
	if err != nil {
		t.Fatalf("pull the index: %v", err)
	}
	d, _ := idx.Digest()
	if d.String() != got {
		t.Errorf("Push returned %s, the registry holds %s", got, d)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, e := range m.Manifests {
		platforms = append(platforms, e.Platform.String())
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, platforms); diff != "" {
		t.Errorf("platforms of the index: -want, +got:\n%s", diff)
	}

	// Two packages for one platform are a mistake, not an index.
	if _, err := Push(t.Context(), []string{files[0], files[0]}, ref, r.Transport()); err == nil {
		t.Error("Push of two linux/amd64 packages: want an error, got none")
	}
}
