/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Command xpkgpush pushes Crossplane package files (what `crossplane xpkg
// build` writes: an OCI image tarball) to an OCI registry, without Docker.
//
//	xpkgpush [-ca-file ca.crt] FILE[,FILE...]=REGISTRY/REPO:TAG [FILE=REF ...]
//
// Several files for one reference are the builds of one package for several
// platforms: they are pushed as an image index, each under the platform its
// configuration names, so every node pulls the image of its own
// architecture.
//
// -ca-file adds a CA to the system roots, for a registry whose certificate a
// test harness signed (internal/testenv/ociregistry). Credentials, if the
// registry needs any, come from the Docker config (~/.docker/config.json).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	errReadCA    = "cannot read the CA file"
	errParseCA   = "the CA file holds no PEM certificate"
	errFmtArg    = "argument %q is not FILE=REF"
	errParseRef  = "cannot parse the image reference"
	errReadImage = "cannot read the package file"
	errPush      = "cannot push the package"
	errDigest    = "cannot compute the package digest"
	errConfig    = "cannot read the package's configuration"
	errIndex     = "cannot add the package to the image index"
	errFmtTwice  = "two packages for platform %s"
)

// pushTimeout bounds one push: packages embedding a runtime image are tens of
// megabytes.
const pushTimeout = 5 * time.Minute

func main() {
	caFile := flag.String("ca-file", "", "PEM CA certificate to trust in addition to the system roots.")
	via := flag.String("via", "", "HOST:PORT to connect to instead of the registry the reference names (TLS still verifies the reference's host): push to a registry by the name nodes pull it by.")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: xpkgpush [-ca-file FILE] [-via HOST:PORT] FILE[,FILE...]=REGISTRY/REPO:TAG ...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	rt, err := transport(*caFile, *via)
	if err != nil {
		fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pushTimeout)
	defer cancel()
	for _, a := range flag.Args() {
		file, ref, ok := strings.Cut(a, "=")
		if !ok || file == "" || ref == "" {
			fail(errors.Errorf(errFmtArg, a))
		}
		d, err := Push(ctx, strings.Split(file, ","), ref, rt)
		if err != nil {
			fail(errors.Wrapf(err, "%s", file))
		}
		fmt.Printf("%s@%s\n", ref, d)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "xpkgpush:", err)
	os.Exit(1)
}

// transport trusts the system roots plus caFile, if set, and dials via
// instead of the registry's address, if set.
func transport(caFile, via string) (http.RoundTripper, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if via != "" {
		d := &net.Dialer{Timeout: 30 * time.Second}
		t.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, via)
		}
	}
	if caFile == "" {
		return t, nil
	}
	pem, err := os.ReadFile(caFile) //nolint:gosec // The user names the file.
	if err != nil {
		return nil, errors.Wrap(err, errReadCA)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New(errParseCA)
	}
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}

// Push pushes the package file to ref, or an image index of the package
// files if there are several, and returns the pushed digest.
func Push(ctx context.Context, files []string, ref string, rt http.RoundTripper) (string, error) {
	r, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		return "", errors.Wrap(err, errParseRef)
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(rt), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if len(files) == 1 {
		img, err := tarball.ImageFromPath(files[0], nil)
		if err != nil {
			return "", errors.Wrap(err, errReadImage)
		}
		d, err := img.Digest()
		if err != nil {
			return "", errors.Wrap(err, errDigest)
		}
		return d.String(), errors.Wrap(remote.Write(r, img, opts...), errPush)
	}
	idx, err := index(files)
	if err != nil {
		return "", err
	}
	d, err := idx.Digest()
	if err != nil {
		return "", errors.Wrap(err, errDigest)
	}
	return d.String(), errors.Wrap(remote.WriteIndex(r, idx, opts...), errPush)
}

// index returns an OCI image index of the package files, each under the
// platform of its configuration.
func index(files []string) (v1.ImageIndex, error) {
	var idx v1.ImageIndex = mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]bool{}
	for _, f := range files {
		img, err := tarball.ImageFromPath(f, nil)
		if err != nil {
			return nil, errors.Wrapf(err, "%s: %s", f, errReadImage)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, errors.Wrapf(err, "%s: %s", f, errConfig)
		}
		p := cf.Platform()
		if p == nil || seen[p.String()] {
			return nil, errors.Errorf(errFmtTwice, p)
		}
		seen[p.String()] = true
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	if _, err := idx.Digest(); err != nil {
		return nil, errors.Wrap(err, errIndex)
	}
	return idx, nil
}
