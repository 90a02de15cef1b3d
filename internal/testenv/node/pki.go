/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

const (
	errPKI       = "cannot make the control plane's certificates"
	pkiValidity  = 7 * 24 * time.Hour
	pkiSerialLen = 128
)

// The cluster's names and addresses, as pods see them.
const (
	// ServiceCIDR holds the Services' cluster IPs.
	ServiceCIDR = "10.96.0.0/16"
	// KubernetesServiceIP is the cluster IP of default/kubernetes, the
	// first of ServiceCIDR.
	KubernetesServiceIP = "10.96.0.1"
	// APIServerPort is where kube-apiserver listens, on every address of
	// the node's network namespace (its loopback, BridgeIP).
	APIServerPort = 6443
	// ServiceAccountIssuer is the issuer of the ServiceAccount tokens.
	ServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"
)

// apiServerNames are the serving certificate's names: what in-cluster
// clients (the kubernetes Service, its DNS names) and the node's loopback
// and bridge address dial.
var apiServerNames = []string{
	"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
}

var apiServerIPs = []net.IP{
	net.ParseIP("127.0.0.1"), net.ParseIP(BridgeIP), net.ParseIP(KubernetesServiceIP),
}

// pki is a certificate authority whose files live in dir: NAME.crt and
// NAME.key, PEM.
type pki struct {
	dir string
	ca  *x509.Certificate
	key *ecdsa.PrivateKey
}

// newPKI makes the cluster's CA (ca.crt, ca.key) in dir.
func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, errors.Wrap(err, errPKI)
	}
	p := &pki{dir: dir}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "egressproxy-cluster-ca"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	crt, key, err := p.issue("ca", tmpl, nil, nil)
	if err != nil {
		return nil, err
	}
	p.ca, p.key = crt, key
	return p, nil
}

// file returns the path of one of the files.
func (p *pki) file(name string) string { return filepath.Join(p.dir, name) }

// serving issues a serving certificate for names and ips.
func (p *pki) serving(name string, names []string, ips []net.IP) error {
	_, _, err := p.issue(name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: names[0]},
		DNSNames:    names,
		IPAddresses: ips,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, p.ca, p.key)
	return err
}

// client issues a client certificate for user cn in groups.
func (p *pki) client(name, cn string, groups ...string) error {
	_, _, err := p.issue(name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, p.ca, p.key)
	return err
}

// keyPair writes a bare key pair, NAME.key and NAME.pub: the ServiceAccount
// tokens' signing key.
func (p *pki) keyPair(name string) error {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return errors.Wrap(err, errPKI)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return errors.Wrap(err, errPKI)
	}
	if err := p.writeKey(name+".key", k); err != nil {
		return err
	}
	return p.write(name+".pub", "PUBLIC KEY", pub)
}

// issue signs tmpl with parent (itself when nil) and writes NAME.crt and
// NAME.key.
func (p *pki) issue(name string, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, errors.Wrap(err, errPKI)
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), pkiSerialLen)); err != nil {
		return nil, nil, errors.Wrap(err, errPKI)
	}
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(pkiValidity)
	if parent == nil {
		parent, parentKey = tmpl, k
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &k.PublicKey, parentKey)
	if err != nil {
		return nil, nil, errors.Wrap(err, errPKI)
	}
	crt, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, errors.Wrap(err, errPKI)
	}
	if err := p.write(name+".crt", "CERTIFICATE", der); err != nil {
		return nil, nil, err
	}
	return crt, k, p.writeKey(name+".key", k)
}

func (p *pki) writeKey(name string, k *ecdsa.PrivateKey) error {
	b, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return errors.Wrap(err, errPKI)
	}
	return p.write(name, "PRIVATE KEY", b)
}

func (p *pki) write(name, typ string, der []byte) error {
	b := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	return errors.Wrap(os.WriteFile(p.file(name), b, 0o600), errPKI)
}

// read returns the contents of one of the files.
func (p *pki) read(name string) ([]byte, error) {
	b, err := os.ReadFile(p.file(name))
	return b, errors.Wrap(err, errPKI)
}
