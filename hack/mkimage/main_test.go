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

func TestParseAddition(t *testing.T) {
	cases := map[string]struct {
		reason string
		spec   string
		want   Addition
		err    bool
	}{
		"Folder":      {reason: "SRC:DST.", spec: "cluster/crds:/crds", want: Addition{Src: "cluster/crds", Dst: "/crds"}},
		"ColonInSrc":  {reason: "DST is after the last colon.", spec: "a:b:/c", want: Addition{Src: "a:b", Dst: "/c"}},
		"RelativeDst": {reason: "DST must be absolute.", spec: "a:crds", err: true},
		"UncleanDst":  {reason: "DST must be clean.", spec: "a:/crds/../etc", err: true},
		"Root":        {reason: "DST cannot be the root.", spec: "a:/", err: true},
		"NoColon":     {reason: "DST is required.", spec: "/crds", err: true},
		"NoSrc":       {reason: "SRC is required.", spec: ":/crds", err: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseAddition(tc.spec)
			if (err != nil) != tc.err {
				t.Fatalf("\n%s\nParseAddition(%q): error %v, want error %t", tc.reason, tc.spec, err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nParseAddition(%q): -want, +got:\n%s", tc.reason, tc.spec, diff)
			}
		})
	}
}

// layerFiles returns the names and modes of the files in an image's one
// layer, and the content of those under dir.
func layerFiles(t *testing.T, o Options) (map[string]int64, map[string]string) {
	t.Helper()
	img, err := Build(o)
	if err != nil {
		t.Fatalf("Build(...): %v", err)
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
	modes, data := map[string]int64{}, map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return modes, data
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s is owned by %d:%d, want root", h.Name, h.Uid, h.Gid)
		}
		modes[h.Name] = h.Mode
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			data[h.Name] = string(b)
		}
	}
}

func TestBuildAdd(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("bin", "#!binary", 0o755)
	// Read-only, as in the Go module cache.
	write("crds/b.yaml", "kind: B", 0o444)
	write("crds/a.yaml", "kind: A", 0o444)
	write("crds/sub/run.sh", "#!/bin/sh", 0o555)
	write("one.yaml", "kind: One", 0o600)

	o := Options{
		Binary: filepath.Join(dir, "bin"), Path: "/usr/local/bin/crossplane",
		Add: []Addition{{Src: filepath.Join(dir, "crds"), Dst: "/crds"}, {Src: filepath.Join(dir, "one.yaml"), Dst: "/etc/one.yaml"}},
	}
	modes, data := layerFiles(t, o)
	wantModes := map[string]int64{
		"tmp/": 0o1777, "usr/local/bin/crossplane": 0o755,
		"crds/": 0o755, "crds/a.yaml": 0o644, "crds/b.yaml": 0o644, "crds/sub/": 0o755, "crds/sub/run.sh": 0o755,
		"etc/one.yaml": 0o644,
	}
	if diff := cmp.Diff(wantModes, modes); diff != "" {
		t.Errorf("layer files: -want, +got:\n%s", diff)
	}
	wantData := map[string]string{
		"usr/local/bin/crossplane": "#!binary",
		"crds/a.yaml":              "kind: A", "crds/b.yaml": "kind: B", "crds/sub/run.sh": "#!/bin/sh",
		"etc/one.yaml": "kind: One",
	}
	if diff := cmp.Diff(wantData, data); diff != "" {
		t.Errorf("layer contents: -want, +got:\n%s", diff)
	}

	for name, add := range map[string]Addition{
		"OverTheBinary": {Src: filepath.Join(dir, "one.yaml"), Dst: "/usr/local/bin/crossplane"},
		"Missing":       {Src: filepath.Join(dir, "nope"), Dst: "/nope"},
	} {
		o.Add = []Addition{add}
		if _, err := Build(o); err == nil {
			t.Errorf("%s: Build(...) with -add %s:%s succeeded, want an error", name, add.Src, add.Dst)
		}
	}
}
