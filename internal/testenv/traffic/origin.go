/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package traffic

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

const (
	errCert      = "cannot make the origin's certificate"
	errFmtListen = "cannot listen on %s in the network namespace"
)

// An Origin serves Body over HTTP on port 80 and HTTPS on port 443 of its
// addresses, inside a network namespace.
type Origin struct {
	// Roots trusts the origin's self-signed certificate.
	Roots   *x509.CertPool
	servers []*http.Server
}

// StartOrigin starts an origin on addrs inside the network namespace at
// netns. Close stops it.
func StartOrigin(netns string, addrs ...string) (*Origin, error) {
	cert, roots, err := selfSigned(addrs)
	if err != nil {
		return nil, errors.Wrap(err, errCert)
	}
	o := &Origin{Roots: roots}
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, Body) })
	for _, a := range addrs {
		for _, port := range []string{"80", "443"} {
			var l net.Listener
			addr := net.JoinHostPort(a, port)
			if err := testenv.InNetNS(netns, func() (err error) {
				l, err = net.Listen("tcp", addr)
				return err
			}); err != nil {
				o.Close()
				return nil, errors.Wrapf(err, errFmtListen, addr)
			}
			// ErrorLog: a client cut off mid-handshake (a load that
			// ends) is no error of the origin's, and would fill stderr.
			srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
			if port == "443" {
				l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
			}
			o.servers = append(o.servers, srv)
			go func() { _ = srv.Serve(l) }()
		}
	}
	return o, nil
}

// Close stops the origin.
func (o *Origin) Close() {
	for _, s := range o.servers {
		_ = s.Close()
	}
}

// selfSigned makes a certificate for the addresses, made at run time: no key
// is stored anywhere.
func selfSigned(addrs []string) (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "egressproxy test origin"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, a := range addrs {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(a))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(c)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: c}, roots, nil
}
