/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package node

import (
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPKI checks that the apiserver's serving certificate verifies, with
// the cluster's CA only, for every name and address an in-cluster client
// or the host dials, and that the admin certificate is a system:masters
// client certificate.
func TestPKI(t *testing.T) {
	p, err := newPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.serving("apiserver", apiServerNames, apiServerIPs); err != nil {
		t.Fatal(err)
	}
	if err := p.client("admin", "egressproxy-admin", "system:masters"); err != nil {
		t.Fatal(err)
	}
	ca, err := p.read("ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	load := func(name string) *x509.Certificate {
		b, err := p.read(name)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	srv := load("apiserver.crt")
	for _, name := range []string{
		"kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "kubernetes", "kubernetes.default", "localhost",
		"127.0.0.1", BridgeIP, KubernetesServiceIP,
	} {
		if _, err := srv.Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err != nil {
			t.Errorf("the serving certificate does not verify for %s: %v", name, err)
		}
	}
	if _, err := srv.Verify(x509.VerifyOptions{DNSName: "10.88.0.2", Roots: roots}); err == nil {
		t.Errorf("the serving certificate verifies for a pod's address")
	}
	admin := load("admin.crt")
	if _, err := admin.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the admin certificate is no client certificate of the CA: %v", err)
	}
	if diff := cmp.Diff([]string{"system:masters"}, admin.Subject.Organization); diff != "" {
		t.Errorf("admin groups: -want, +got:\n%s", diff)
	}
}
