/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "function")
	if err := os.WriteFile(bin, []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	o := Options{Binary: bin, User: "65532:65532", ExposedPorts: []string{"9443/tcp"}, Labels: ociLabels(bin, "xpkg.example.org/egressproxy/fn:v0.1.0", defaultSource, defaultLicenses)}
	if err := write(o, "xpkg.example.org/fn:v0.1.0", out); err != nil {
		t.Fatalf("write(...): %v", err)
	}

	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatalf("tarball.ImageFromPath(...): %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	type config struct {
		Platform   string
		Entrypoint []string
		User       string
		Labels     map[string]string
	}
	want := config{Platform: "linux/amd64", Entrypoint: []string{"/function"}, User: "65532:65532", Labels: o.Labels}
	got := config{Platform: cf.OS + "/" + cf.Architecture, Entrypoint: cf.Config.Entrypoint, User: cf.Config.User, Labels: cf.Config.Labels}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("image config: -want, +got:\n%s", diff)
	}

	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("img.Layers(): %d layers, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close() //nolint:errcheck // Only read.
	files := map[string]int64{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h.Mode
	}
	wantFiles := map[string]int64{"tmp/": 0o1777, "function": 0o755}
	if diff := cmp.Diff(wantFiles, files); diff != "" {
		t.Errorf("layer files: -want, +got:\n%s", diff)
	}

	// Reproducible: the same binary gives the same image.
	first, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := first.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("Build(...) is not reproducible: %s != %s", d1, d2)
	}
}

func TestOCILabels(t *testing.T) {
	// A binary that is no Go binary has no VCS stamp, and outside a git
	// checkout git knows no commit: no revision label.
	t.Chdir(t.TempDir())
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(mustGetwd(t)))
	bin := filepath.Join(t.TempDir(), "provider")
	if err := os.WriteFile(bin, []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		LabelSource:   defaultSource,
		LabelLicenses: defaultLicenses,
		LabelTitle:    "provider-egressproxy",
		LabelVersion:  "v0.1.0",
	}
	if diff := cmp.Diff(want, ociLabels(bin, "registry.example.com:5000/egressproxy/provider-egressproxy:v0.1.0", defaultSource, defaultLicenses)); diff != "" {
		t.Errorf("ociLabels: -want +got:\n%s", diff)
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
