/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/node"
)

const errTLSFront = "cannot serve a TLS front for the pods"

// tlsFront serves hostAddr, a plain server on the host's loopback, to the
// node and its pods over TLS at node.BridgeIP:<free port>, with a
// certificate of a CA of its own: what a private endpoint with a private CA
// is to a provider. It returns the address and the CA (PEM).
func (c *Cluster) tlsFront(hostAddr string) (string, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", nil, errors.Wrap(err, errTLSFront)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "egressproxy test endpoint CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", nil, errors.Wrap(err, errTLSFront)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", nil, errors.Wrap(err, errTLSFront)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", nil, errors.Wrap(err, errTLSFront)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: node.BridgeIP},
		IPAddresses: []net.IP{net.ParseIP(node.BridgeIP)},
		NotBefore:   time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", nil, errors.Wrap(err, errTLSFront)
	}
	l, err := c.Node.Listen(net.JoinHostPort(node.BridgeIP, "0"))
	if err != nil {
		return "", nil, errors.Wrap(err, errTLSFront)
	}
	c.cleanups = append(c.cleanups, func() { _ = l.Close() })
	tl := tls.NewListener(l, &tls.Config{MinVersion: tls.VersionTLS12,
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	go func() {
		for {
			in, err := tl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close() //nolint:errcheck // Either side may close first.
				out, err := net.Dial("tcp", hostAddr)
				if err != nil {
					return
				}
				defer out.Close() //nolint:errcheck // Either side may close first.
				go func() { _, _ = io.Copy(out, in); _ = out.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
	return l.Addr().String(), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}
