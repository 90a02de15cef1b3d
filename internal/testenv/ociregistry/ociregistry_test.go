/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package ociregistry

import (
	"context"
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func TestPushPullByTag(t *testing.T) {
	cases := map[string]struct {
		reason string
		opts   Options
	}{
		"InMemory": {
			reason: "An image pushed by tag must come back by that tag, with the same digest.",
		},
		"OnDisk": {
			reason: "Blobs kept on disk must serve the same image.",
			opts:   Options{BlobsOnDisk: true},
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			r := Start(t, tc.opts)
			img, err := random.Image(1024, 2)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := img.Digest()
			ref, err := name.ParseReference(r.Host + "/egressproxy/function-egressproxy:v0.1.0")
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithTransport(r.Transport())); err != nil {
				t.Fatalf("push: %v", err)
			}
			got, err := remote.Image(ref, remote.WithContext(ctx), remote.WithTransport(r.Transport()))
			if err != nil {
				t.Fatalf("pull: %v", err)
			}
			gotDigest, _ := got.Digest()
			if diff := cmp.Diff(want.String(), gotDigest.String()); diff != "" {
				t.Errorf("%s\npulled digest: -want, +got:\n%s", tc.reason, diff)
			}
			// Crossplane's dependency resolver picks a version from the tag list.
			tags, err := remote.List(ref.Context(), remote.WithContext(ctx), remote.WithTransport(r.Transport()))
			if err != nil {
				t.Fatalf("list tags: %v", err)
			}
			if diff := cmp.Diff([]string{"v0.1.0"}, tags); diff != "" {
				t.Errorf("tags: -want, +got:\n%s", diff)
			}
		})
	}
}

func TestTLSNeedsTheCA(t *testing.T) {
	r := Start(t, Options{})
	// A client without the registry's CA must refuse the connection: the
	// registry really is behind TLS, not plain HTTP.
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}}
	rsp, err := c.Get("https://" + r.Host + "/v2/")
	if err == nil {
		_ = rsp.Body.Close()
		t.Fatal("GET /v2/ without the CA: want a certificate error, got none")
	}
	rsp, err = (&http.Client{Transport: r.Transport()}).Get("https://" + r.Host + "/v2/")
	if err != nil {
		t.Fatalf("GET /v2/ with the CA: %v", err)
	}
	_ = rsp.Body.Close()
	if rsp.StatusCode != http.StatusOK {
		t.Errorf("GET /v2/: want 200, got %d", rsp.StatusCode)
	}
}

// TestConcurrentUploads: a client uploads several layers at once
// (go-containerregistry: four). Over HTTP/2 the registry deadlocked on them:
// each upload waits for one lock, and the bodies of those waiting filled the
// connection's flow-control window, so the one holding the lock never got
// the rest of its body. A push of several layers larger than that window
// must finish.
func TestConcurrentUploads(t *testing.T) {
	r := Start(t, Options{BlobsOnDisk: true})
	img, err := random.Image(4<<20, 4)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.Host + "/egressproxy/provider-egressproxy:v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithTransport(r.Transport())); err != nil {
		t.Fatalf("push of four 4 MiB layers at once: %v", err)
	}
}
