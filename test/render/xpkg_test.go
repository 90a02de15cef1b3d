/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package render_test

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/ociregistry"
)

// TestXpkg builds the packages with hack/xpkg.sh and checks what each holds:
// the runtime image's entrypoint and the package's objects.
func TestXpkg(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries, images and packages: skipped with -short")
	}
	cli := testenv.Tool(t, "crossplane")
	out := t.TempDir()

	type pkg struct {
		Entrypoint []string
		Kinds      []string
	}
	want := map[string]pkg{
		"function-egressproxy": {Entrypoint: []string{"/function"}, Kinds: []string{"CustomResourceDefinition", "Function"}},
		"configuration-egressproxy": {Kinds: []string{
			"CompositeResourceDefinition", "Composition", "Composition", "Composition", "Configuration"}},
		"configuration-egressproxy-namespaced": {Kinds: []string{
			"CompositeResourceDefinition", "Composition", "Composition", "Composition", "Configuration"}},
		// The provider's CRDs change with its API: only check that the
		// package holds nothing else.
		"provider-egressproxy": {Entrypoint: []string{"/provider"}, Kinds: []string{"Provider"}},
	}
	// XPKG_PARTS="function configuration" builds only those, for instance
	// while the provider does not compile.
	parts := strings.Fields(os.Getenv("XPKG_PARTS"))
	if len(parts) == 0 {
		parts = []string{"function", "configuration", "configuration-namespaced"}
		if main, _ := filepath.Glob(repoPath("cmd", "provider", "*.go")); len(main) > 0 {
			parts = append(parts, "provider")
		} else {
			t.Log("cmd/provider does not exist yet: building only the function and configuration packages")
		}
	}
	for name := range want {
		part := strings.TrimSuffix(name, "-egressproxy")
		if name == "configuration-egressproxy-namespaced" {
			part = "configuration-namespaced"
		}
		if !slices.Contains(parts, part) {
			delete(want, name)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, repoPath("hack", "xpkg.sh"), parts...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "OUTPUT_DIR="+out, "CROSSPLANE="+cli, "VERSION=v0.0.0-test")
	// Only this host's architecture: TestXpkgImageIndex checks the others.
	cmd.Env = append(cmd.Env, cluster.HarnessEnv()...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/xpkg.sh %v: %v\n%s", parts, err, b)
	}
	// hack/xpkg.sh names the amd64 packages plainly, others -linux_ARCH.
	suffix := ""
	if runtime.GOARCH != "amd64" {
		suffix = "-linux_" + runtime.GOARCH
	}

	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			file := name + "-v0.0.0-test.xpkg"
			if strings.HasPrefix(name, "provider") || strings.HasPrefix(name, "function") {
				file = name + "-v0.0.0-test" + suffix + ".xpkg"
			}
			img, err := tarball.ImageFromPath(filepath.Join(out, "xpkg", file), nil)
			if err != nil {
				t.Fatalf("cannot read the package: %v", err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			got := pkg{Entrypoint: cf.Config.Entrypoint, Kinds: packageKinds(t, img)}
			if name == "provider-egressproxy" {
				got.Kinds = withoutCRDs(got.Kinds)
			}
			if diff := cmp.Diff(w, got); diff != "" {
				t.Errorf("package %s: -want +got:\n%s", name, diff)
			}
			if w.Entrypoint != nil {
				checkOCILabels(t, name, cf.Config.Labels)
			}
		})
	}
}

// checkOCILabels checks a runtime image carries the OCI labels registries
// and scanners show: where its source is, under which license, what it is,
// its version and the commit it was built from.
func checkOCILabels(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	want := map[string]string{
		"org.opencontainers.image.source":   "https://github.com/egressproxy/provider-egressproxy",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.title":    name,
		"org.opencontainers.image.version":  "v0.0.0-test",
	}
	for k, v := range want {
		if labels[k] != v {
			t.Errorf("%s: label %s = %q, want %q", name, k, labels[k], v)
		}
	}
	// The commit, when the tree is a git checkout (Go stamps it then).
	if _, err := os.Stat(repoPath(".git")); err == nil {
		if rev := labels["org.opencontainers.image.revision"]; !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(rev) {
			t.Errorf("%s: label org.opencontainers.image.revision = %q, want the commit", name, rev)
		}
	}
}

func withoutCRDs(kinds []string) []string {
	var out []string
	for _, k := range kinds {
		if k != "CustomResourceDefinition" {
			out = append(out, k)
		}
	}
	return out
}

// packageKinds returns the sorted kinds of the objects in the package's
// package.yaml.
func packageKinds(t *testing.T, img v1.Image) []string {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Name != "package.yaml" {
				continue
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			_ = rc.Close()
			var kinds []string
			for _, d := range splitDocs(t, string(b)) {
				kinds = append(kinds, str(d, "kind"))
			}
			sort.Strings(kinds)
			return kinds
		}
		_ = rc.Close()
	}
	t.Fatal("the package has no package.yaml")
	return nil
}

// TestXpkgFunctionName builds the Configurations for registries whose path
// does not end in /egressproxy: Crossplane names the Function it installs as
// a dependency after the repository path (xpkg.ToDNSLabel of
// name.Reference.Context().RepositoryStr(), in its package manager's
// dependency resolver), so the Compositions must call that name, or every
// claim stays uncomposed. A stand-in for `crossplane xpkg build` keeps the
// package roots hack/xpkg.sh hands it; the push goes to a loopback registry.
func TestXpkgFunctionName(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and pushes packages: skipped with -short")
	}
	cases := map[string]struct {
		reason string
		path   string
		want   string
	}{
		"Release": {
			reason: "The release path gives the name the Compositions are written with.",
			path:   "egressproxy", want: "egressproxy-function-egressproxy",
		},
		"Nested": {
			reason: "acme/proxies/function-egressproxy becomes acme-proxies-function-egressproxy.",
			path:   "acme/proxies", want: "acme-proxies-function-egressproxy",
		},
		"Dots": {
			reason: "Dots and dashes in the path become dashes.",
			path:   "team.a/egress-proxy", want: "team-a-egress-proxy-function-egressproxy",
		},
	}
	reg := ociregistry.Start(t, ociregistry.Options{})
	cli, env := fakeXpkgBuild(t)
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			out, capture := t.TempDir(), t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, repoPath("hack", "xpkg.sh"), "configuration", "configuration-namespaced")
			cmd.Dir = testenv.RepoRoot()
			cmd.Env = append(os.Environ(), env...)
			cmd.Env = append(cmd.Env, "OUTPUT_DIR="+out, "CROSSPLANE="+cli, "VERSION=v0.1.0",
				"REGISTRY="+reg.Host+"/"+tc.path, "REGISTRY_CA="+reg.CAFile, "CAPTURE="+capture)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s\nhack/xpkg.sh: %v\n%s", tc.reason, err, b)
			}
			files, _ := filepath.Glob(filepath.Join(capture, "*", "composition-*.yaml"))
			if len(files) != 6 {
				t.Fatalf("want the 6 Compositions of both Configurations, got %v", files)
			}
			for _, f := range files {
				b, err := os.ReadFile(f) //nolint:gosec // A file the test made.
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range splitDocs(t, string(b)) {
					steps, _ := field(d, "spec", "pipeline").([]any)
					for _, s := range steps {
						got := str(s.(map[string]any), "functionRef", "name")
						if got != tc.want {
							t.Errorf("%s\n%s: functionRef.name is %q, but Crossplane installs the Function from %s/%s/function-egressproxy as %q",
								tc.reason, strings.TrimPrefix(f, capture+"/"), got, reg.Host, tc.path, tc.want)
						}
					}
				}
			}
		})
	}
}

// fakeXpkgBuild returns a stand-in for the Crossplane CLI's `xpkg build`,
// and the environment it needs: it keeps the package root it is given in
// $CAPTURE/<package file name>, and writes as the package the runtime image
// it is to embed, or else an empty image, so that hack/xpkg.sh's push has
// something to push with the image's platform.
func fakeXpkgBuild(t *testing.T) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	emptyImage := filepath.Join(dir, "empty.tar")
	if err := tarball.WriteToFile(emptyImage, name.MustParseReference("example.org/empty:v0"), empty.Image); err != nil {
		t.Fatal(err)
	}
	cli := filepath.Join(dir, "crossplane")
	fake := `#!/bin/sh
image=$EMPTY_IMAGE
for a; do
  case $a in
    --package-root=*) root=${a#*=} ;;
    --package-file=*) file=${a#*=} ;;
    --embed-runtime-image-tarball=*) image=${a#*=} ;;
  esac
done
keep="$CAPTURE/$(basename "$file" .xpkg)"
mkdir -p "$keep" && cp -R "$root/." "$keep/" && cp "$image" "$file"
`
	if err := os.WriteFile(cli, []byte(fake), 0o755); err != nil { //nolint:gosec // An executable of the test.
		t.Fatal(err)
	}
	return cli, []string{"EMPTY_IMAGE=" + emptyImage}
}

// TestXpkgImageIndex builds the Function package for a registry and checks
// what hack/xpkg.sh pushed: an image index with a linux/amd64 and a
// linux/arm64 image, each running a binary of its own architecture, so
// that arm64 nodes (kind on Apple silicon, Arm node pools) run the package
// instead of failing with "no match for platform" or "exec format error".
// The Crossplane CLI's part is a stand-in (fakeXpkgBuild): the pushed
// package is the runtime image it would embed.
func TestXpkgImageIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles the function and pushes it: skipped with -short")
	}
	reg := ociregistry.Start(t, ociregistry.Options{})
	cli, env := fakeXpkgBuild(t)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, repoPath("hack", "xpkg.sh"), "function")
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), env...)
	// Every architecture a release pushes, whatever the environment says;
	// untrimmed, the amd64 build is the one make xpkg-binaries cached.
	cmd.Env = append(cmd.Env, "ARCHES=amd64 arm64", "XPKG_TRIMPATH=0", "OUTPUT_DIR="+out, "CROSSPLANE="+cli, "VERSION=v0.1.0",
		"REGISTRY="+reg.Host+"/egressproxy", "REGISTRY_CA="+reg.CAFile, "CAPTURE="+t.TempDir())
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/xpkg.sh function: %v\n%s", err, b)
	}

	ref, err := name.ParseReference(reg.Host + "/egressproxy/function-egressproxy:v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(ref, remote.WithTransport(reg.Transport()))
	if err != nil {
		t.Fatalf("the pushed function package is not an image index: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{}
	for _, d := range m.Manifests {
		if d.Platform == nil {
			t.Fatalf("index entry %s names no platform", d.Digest)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		machines[d.Platform.String()] = entrypointMachine(t, img)
	}
	want := map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64}
	if diff := cmp.Diff(want, machines); diff != "" {
		t.Errorf("platforms of the index, and the ELF machine of each image's entrypoint: -want, +got:\n%s", diff)
	}
}

// entrypointMachine returns the ELF machine of the image's entrypoint.
func entrypointMachine(t *testing.T, img v1.Image) elf.Machine {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil || len(cf.Config.Entrypoint) == 0 {
		t.Fatalf("the image has no entrypoint: %v", err)
	}
	entry := strings.TrimPrefix(cf.Config.Entrypoint[0], "/")
	rc := mutate.Extract(img)
	defer rc.Close() //nolint:errcheck // Only read.
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("the image holds no %s: %v", entry, err)
		}
		if h.Name != entry {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s is not an ELF binary: %v", entry, err)
		}
		return f.Machine
	}
}
