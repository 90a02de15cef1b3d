/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package testenv

import (
	"crypto/x509"
	_ "embed" // The test chain.
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// googleChain is a real public TLS chain: www.google.com, GTS CA 1C3, and
// GTS Root R1 (which it does not hold).
//
//go:embed testdata/google-chain.pem
var googleChain []byte

// googleChainTime is when googleChain was valid.
var googleChainTime = time.Unix(1677615892, 0)

// envRootsChild marks the process EmbeddedRoots starts to verify the chain.
const envRootsChild = "EGRESSPROXY_TEST_EMBEDDED_ROOTS"

// EmbeddedRoots checks that the test's binary, and so the command it tests,
// carries its own TLS roots: in a process that finds none where Go looks on
// Linux (SSL_CERT_FILE and SSL_CERT_DIR name empty places, as on an empty
// image without a CA bundle), a real www.google.com chain still verifies up
// to GTS Root R1, the root of Google's APIs. Without embedded roots it
// fails with an unknown authority, as every Compute Engine and OAuth call
// then would. It runs the test again in a child process: Go reads the
// system roots once per process.
func EmbeddedRoots(t *testing.T) {
	t.Helper()
	if os.Getenv(envRootsChild) == "1" {
		verifyGoogleChain(t)
		return
	}
	empty := t.TempDir()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v") //nolint:gosec // The test binary itself.
	cmd.Env = append(os.Environ(), envRootsChild+"=1",
		"SSL_CERT_FILE="+filepath.Join(empty, "none.pem"), "SSL_CERT_DIR="+empty)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("with no system roots, the binary cannot verify a public chain (it embeds no roots): %v\n%s", err, out)
	}
}

func verifyGoogleChain(t *testing.T) {
	t.Helper()
	var certs []*x509.Certificate
	for rest := googleChain; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	if len(certs) != 2 {
		t.Fatalf("testdata/google-chain.pem: want a leaf and an intermediate, got %d certificates", len(certs))
	}
	inter := x509.NewCertPool()
	inter.AddCert(certs[1])
	// Roots nil: the system's, which hold only what the binary embeds.
	chains, err := certs[0].Verify(x509.VerifyOptions{DNSName: "www.google.com", Intermediates: inter, CurrentTime: googleChainTime})
	if err != nil {
		t.Fatalf("verify www.google.com: %v", err)
	}
	if root := chains[0][len(chains[0])-1]; root.Subject.CommonName != "GTS Root R1" {
		t.Fatalf("verify www.google.com: want a chain to GTS Root R1, got one to %s", root.Subject)
	}
}
