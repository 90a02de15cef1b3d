/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Command mkimage builds a one-layer linux OCI image tarball that holds a
// static binary on an empty base, with the binary as entrypoint. It needs
// no Docker: `crossplane xpkg build --embed-runtime-image-tarball` embeds the
// result in a Provider or Function package.
//
//	mkimage -binary _output/bin/linux_amd64/function -path /function \
//	  -ref xpkg.egressproxy.io/egressproxy/function-egressproxy:v0.1.0 -o function.tar
//
// -add SRC:DST (repeatable) also puts a file or a folder (recursively) at DST,
// owned by root and world-readable, such as the CRDs Crossplane's core image
// carries for `crossplane core init` (hack/system-images.sh).
package main

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	errReadBinary  = "cannot read the binary"
	errLayer       = "cannot build the image layer"
	errAppendLayer = "cannot add the layer to the image"
	errConfig      = "cannot set the image configuration"
	errParseRef    = "cannot parse the image reference"
	errWrite       = "cannot write the image tarball"
	errFmtTar      = "cannot add %s to the layer"
	errFmtPath     = "the binary's path in the image must be absolute and clean, not %q"
	errFmtAddSpec  = "-add wants SRC:DST with an absolute, clean DST other than /, not %q"
	errFmtAddRead  = "cannot read %s for -add"
	errFmtAddType  = "-add copies files and folders only; %s is neither"
	errFmtTwice    = "the image would hold %s twice"
)

// Addition is a file or folder copied into the image.
type Addition struct {
	// Src is a file or folder on this machine.
	Src string
	// Dst is its absolute path in the image.
	Dst string
}

// ParseAddition parses SRC:DST. DST is split at the last colon, so SRC may
// hold one.
func ParseAddition(s string) (Addition, error) {
	i := strings.LastIndex(s, ":")
	if i <= 0 {
		return Addition{}, errors.Errorf(errFmtAddSpec, s)
	}
	a := Addition{Src: s[:i], Dst: s[i+1:]}
	if !path.IsAbs(a.Dst) || path.Clean(a.Dst) != a.Dst || a.Dst == "/" {
		return Addition{}, errors.Errorf(errFmtAddSpec, s)
	}
	return a, nil
}

// additions is the repeatable -add flag.
type additions []Addition

func (a *additions) String() string { return fmt.Sprint(*a) }

func (a *additions) Set(s string) error {
	add, err := ParseAddition(s)
	if err != nil {
		return err
	}
	*a = append(*a, add)
	return nil
}

// Options of an image.
type Options struct {
	// Binary is the file to put into the image.
	Binary string
	// Path of the binary in the image; it is the entrypoint.
	Path string
	// Arch is the binary's GOARCH, recorded as the image's architecture.
	Arch string
	// Args are passed to the entrypoint by default.
	Args []string
	// User the entrypoint runs as.
	User string
	// ExposedPorts, such as 9443/tcp.
	ExposedPorts []string
	// Labels of the image config: the OCI annotations keys
	// (org.opencontainers.image.*) a registry and a scanner show.
	Labels map[string]string
	// Add are files and folders copied into the image beside the binary.
	Add []Addition
}

// OCI image label keys (github.com/opencontainers/image-spec annotations.md).
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelLicenses = "org.opencontainers.image.licenses"
	LabelTitle    = "org.opencontainers.image.title"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
)

// Defaults of the labels every image of the project carries.
const (
	defaultSource   = "https://github.com/egressproxy/provider-egressproxy"
	defaultLicenses = "Apache-2.0"
)

func main() {
	o := Options{}
	var ref, out, args, ports, source, licenses string
	var labels []string
	flag.StringVar(&o.Binary, "binary", "", "Static linux binary to put into the image (required).")
	flag.StringVar(&o.Arch, "arch", "amd64", "GOARCH of the binary, recorded as the image's architecture.")
	flag.StringVar(&o.Path, "path", "", "Path of the binary in the image, its entrypoint. Default: /<binary file name>.")
	flag.StringVar(&args, "args", "", "Space-separated default arguments of the entrypoint.")
	flag.StringVar(&o.User, "user", "65532:65532", "User the entrypoint runs as.")
	flag.StringVar(&ports, "expose", "", "Space-separated ports the image exposes, such as 9443/tcp.")
	flag.Var((*additions)(&o.Add), "add", "SRC:DST copies a file or folder into the image at DST (repeatable).")
	flag.StringVar(&ref, "ref", "", "Image reference recorded in the tarball, such as registry/repo:tag (required).")
	flag.StringVar(&out, "o", "", "Output tarball (required).")
	flag.StringVar(&source, "source", defaultSource, "The image's "+LabelSource+" label.")
	flag.StringVar(&licenses, "licenses", defaultLicenses, "The image's "+LabelLicenses+" label (SPDX).")
	flag.Func("label", "A further image label, key=value; repeatable, and overrides the derived ones.", func(v string) error {
		if !strings.Contains(v, "=") {
			return errors.Errorf("label %q is not key=value", v)
		}
		labels = append(labels, v)
		return nil
	})
	flag.Parse()
	if o.Binary == "" || ref == "" || out == "" {
		flag.Usage()
		os.Exit(2)
	}
	o.Args = strings.Fields(args)
	o.ExposedPorts = strings.Fields(ports)
	o.Labels = ociLabels(o.Binary, ref, source, licenses)
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		o.Labels[k] = v
	}
	if err := write(o, ref, out); err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: %v\n", err)
		os.Exit(1)
	}
}

func write(o Options, ref, out string) error {
	img, err := Build(o)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return errors.Wrap(err, errParseRef)
	}
	return errors.Wrap(tarball.WriteToFile(out, tag, img), errWrite)
}

// ociLabels returns the OCI labels of an image of binary tagged ref: the
// title and version from the reference
// (registry/org/provider-egressproxy:v0.1.0), the revision from the VCS
// stamp Go's build wrote into the binary, else from git in the working
// directory (GOFLAGS=-buildvcs=false turns the stamp off), else left out.
func ociLabels(binary, ref, source, licenses string) map[string]string {
	l := map[string]string{LabelSource: source, LabelLicenses: licenses}
	if tag, err := name.NewTag(ref); err == nil {
		l[LabelTitle] = path.Base(tag.RepositoryStr())
		l[LabelVersion] = tag.TagStr()
	}
	if bi, err := buildinfo.ReadFile(binary); err == nil {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				l[LabelRevision] = s.Value
			}
		}
	}
	if l[LabelRevision] == "" {
		if b, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
			l[LabelRevision] = strings.TrimSpace(string(b))
		}
	}
	return l
}

// Build returns the image. It is reproducible: the same binary gives the
// same digest, because every timestamp is the epoch.
func Build(o Options) (v1.Image, error) {
	if o.Path == "" {
		o.Path = "/" + path.Base(o.Binary)
	}
	if !path.IsAbs(o.Path) || path.Clean(o.Path) != o.Path {
		return nil, errors.Errorf(errFmtPath, o.Path)
	}
	layer, err := buildLayer(o)
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer, MediaType: types.OCILayer})
	if err != nil {
		return nil, errors.Wrap(err, errAppendLayer)
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, errors.Wrap(err, errConfig)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.Arch
	if cf.Architecture == "" {
		cf.Architecture = "amd64"
	}
	cf.Config.Entrypoint = []string{o.Path}
	cf.Config.Cmd = o.Args
	cf.Config.User = o.User
	cf.Config.Env = []string{"PATH=/"}
	if len(o.Labels) > 0 {
		cf.Config.Labels = map[string]string{}
		for k, v := range o.Labels {
			cf.Config.Labels[k] = v
		}
	}
	if len(o.ExposedPorts) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range o.ExposedPorts {
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	img, err = mutate.ConfigFile(img, cf)
	return img, errors.Wrap(err, errConfig)
}

// buildLayer returns the one layer: the binary, a world-writable /tmp,
// which an empty base lacks, and the additions. There is no CA bundle: the
// binaries embed their TLS roots.
func buildLayer(o Options) (v1.Layer, error) {
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, errors.Wrap(err, errReadBinary)
	}
	buf := &bytes.Buffer{}
	tw := tar.NewWriter(buf)
	entries := []tarEntry{
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: o.Path[1:], mode: 0o755, data: bin},
	}
	for _, a := range o.Add {
		add, err := additionEntries(a)
		if err != nil {
			return nil, err
		}
		entries = append(entries, add...)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		n := strings.TrimSuffix(e.name, "/")
		if seen[n] {
			return nil, errors.Errorf(errFmtTwice, "/"+n)
		}
		seen[n] = true
		if err := e.writeTo(tw); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, errors.Wrap(err, errLayer)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
	return l, errors.Wrap(err, errLayer)
}

// additionEntries returns the layer entries of a file or a folder tree, in
// lexical order. Modes are normalised (0755 for folders and files anyone may
// run, else 0644), so the image does not depend on the source's umask or on
// the Go module cache's read-only files.
func additionEntries(a Addition) ([]tarEntry, error) {
	var out []tarEntry
	err := filepath.WalkDir(a.Src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(a.Src, p)
		if err != nil {
			return err
		}
		name := path.Join(a.Dst, filepath.ToSlash(rel))[1:]
		switch {
		case d.IsDir():
			out = append(out, tarEntry{name: name + "/", mode: 0o755, dir: true})
			return nil
		case !d.Type().IsRegular():
			return errors.Errorf(errFmtAddType, p)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p) //nolint:gosec // The files the caller asks for.
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		out = append(out, tarEntry{name: name, mode: mode, data: data})
		return nil
	})
	return out, errors.Wrapf(err, errFmtAddRead, a.Src)
}

type tarEntry struct {
	name string
	mode int64
	dir  bool
	data []byte
}

func (e tarEntry) writeTo(tw *tar.Writer) error {
	h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Size: int64(len(e.data)), Format: tar.FormatPAX}
	if e.dir {
		h.Typeflag, h.Size = tar.TypeDir, 0
	}
	if err := tw.WriteHeader(h); err != nil {
		return errors.Wrapf(err, errFmtTar, e.name)
	}
	_, err := tw.Write(e.data)
	return errors.Wrapf(err, errFmtTar, e.name)
}
