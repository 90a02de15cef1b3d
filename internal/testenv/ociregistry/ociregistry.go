/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package ociregistry runs an OCI registry in the test process, on loopback,
// behind TLS with a CA of its own, so that Crossplane's package manager can
// pull the project's packages the way it pulls them from a real registry:
// over HTTPS, by semver tag, trusting the CA through its CA bundle setting.
package ociregistry

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	ggcr "github.com/google/go-containerregistry/pkg/registry"
)

const (
	errKey     = "cannot generate a key"
	errCert    = "cannot create a certificate"
	errListen  = "cannot listen on loopback"
	errWriteCA = "cannot write the CA certificate"
	errDir     = "cannot create the registry's folder"
)

// certValidity is long enough for any test run, short enough not to matter.
const certValidity = 24 * time.Hour

// Options of a Registry.
type Options struct {
	// Dir holds the CA file and, when BlobsOnDisk, the blobs. Default: a new
	// temporary folder that Close removes.
	Dir string
	// BlobsOnDisk keeps blobs in Dir instead of memory: packages that embed
	// runtime images are tens of megabytes each.
	BlobsOnDisk bool
	// IPs are addresses besides loopback the serving certificate names,
	// such as the address a node reaches the registry at.
	IPs []net.IP
	// Log receives the registry's request log. Default: discarded.
	Log io.Writer
}

// A Registry is a running OCI registry on https://127.0.0.1:<port>.
type Registry struct {
	// Host is host:port, the registry part of an image reference.
	Host string
	// CAFile is the PEM file of the CA that signed the server certificate,
	// for clients such as crossplane core --ca-bundle-path.
	CAFile string
	// CAPEM is the same CA certificate, PEM encoded.
	CAPEM []byte

	pool    *x509.CertPool
	srv     *http.Server
	dir     string
	ownsDir bool
}

// New starts a registry.
func New(o Options) (*Registry, error) {
	r := &Registry{dir: o.Dir}
	if r.dir != "" {
		if err := os.MkdirAll(r.dir, 0o700); err != nil {
			return nil, errors.Wrap(err, errDir)
		}
	} else {
		d, err := os.MkdirTemp("", "egressproxy-registry-")
		if err != nil {
			return nil, errors.Wrap(err, errDir)
		}
		r.dir, r.ownsDir = d, true
	}
	ca, caKey, caPEM, err := newCA()
	if err != nil {
		r.removeDir()
		return nil, err
	}
	r.CAPEM = caPEM
	r.pool = x509.NewCertPool()
	r.pool.AddCert(ca)
	r.CAFile = filepath.Join(r.dir, "ca.crt")
	if err := os.WriteFile(r.CAFile, caPEM, 0o600); err != nil {
		r.removeDir()
		return nil, errors.Wrap(err, errWriteCA)
	}
	serverCert, err := newServerCert(ca, caKey, o.IPs)
	if err != nil {
		r.removeDir()
		return nil, err
	}

	opts := []ggcr.Option{ggcr.Logger(log.New(discardIfNil(o.Log), "registry: ", log.LstdFlags))}
	if o.BlobsOnDisk {
		blobs := filepath.Join(r.dir, "blobs")
		if err := os.MkdirAll(blobs, 0o700); err != nil {
			r.removeDir()
			return nil, errors.Wrap(err, errDir)
		}
		opts = append(opts, ggcr.WithBlobHandler(ggcr.NewDiskBlobHandler(blobs)))
	}

	// Loopback only: test traffic never leaves the machine.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.removeDir()
		return nil, errors.Wrap(err, errListen)
	}
	r.Host = l.Addr().String()
	r.srv = &http.Server{
		Handler:           ggcr.New(opts...),
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12},
		ErrorLog:          log.New(io.Discard, "", 0),
		// HTTP/1.1 only. The registry reads a PATCH's body while holding one
		// lock for all uploads; over HTTP/2 the uploads a client sends at
		// once share one connection's flow-control window, the bodies of
		// those waiting for the lock fill it, and the one holding the lock
		// never gets the rest of its body: pushes of several large layers
		// hung until their deadline (google/go-containerregistry#1210, whose
		// workaround this is). One TCP connection per upload keeps them
		// independent.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	go func() { _ = r.srv.ServeTLS(l, "", "") }()
	return r, nil
}

// Start starts a registry for one test and stops it when the test ends.
func Start(t testing.TB, o Options) *Registry {
	t.Helper()
	r, err := New(o)
	if err != nil {
		t.Fatalf("cannot start the registry: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

// Close stops the registry and removes its folder if New made it.
func (r *Registry) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
	r.removeDir()
}

// Transport trusts only the registry's CA.
func (r *Registry) Transport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: r.pool, MinVersion: tls.VersionTLS12}
	return t
}

func (r *Registry) removeDir() {
	if r.ownsDir {
		_ = os.RemoveAll(r.dir)
	}
}

func discardIfNil(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// newCA makes a self-signed CA for one registry.
func newCA() (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, errors.Wrap(err, errKey)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "egressproxy test registry CA"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, errors.Wrap(err, errCert)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, errors.Wrap(err, errCert)
	}
	return ca, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// newServerCert signs a certificate for the loopback names a client may use.
func newServerCert(ca *x509.Certificate, caKey *ecdsa.PrivateKey, ips []net.IP) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, errors.Wrap(err, errKey)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, ips...),
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, errors.Wrap(err, errCert)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}
