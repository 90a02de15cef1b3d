/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The composition function, as the Compositions name it.
const (
	// FunctionName is the functionRef of every Composition.
	FunctionName = "egressproxy-function-egressproxy"

	labelPackage    = "pkg.crossplane.io/package"
	annotationPause = "crossplane.io/paused"

	errParseCA      = "cannot parse Crossplane's CA from Secret crossplane-root-ca"
	errSignCert     = "cannot sign the function's server certificate"
	errWriteCert    = "cannot write the function's server certificate"
	errFunctionUp   = "the function does not accept connections"
	errFnRevision   = "cannot create the FunctionRevision of the local function"
	errFnRevStatus  = "cannot set the endpoint of the local function's FunctionRevision"
	errFmtNoCAField = "Secret %s/%s has no %s"
)

// startFunction runs the composition function as a local process serving
// mTLS, with a server certificate signed by Crossplane's CA, and registers
// it the way core finds functions: a FunctionRevision, paused so the package
// manager never pulls its image, whose status carries the endpoint and the
// composition capability.
func (c *Cluster) startFunction(ctx context.Context) error {
	dir := c.dir("tls", "function")
	if err := c.writeFunctionTLS(ctx, dir); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := []string{"--address=" + addr, "--tls-server-certs-dir=" + dir}
	if c.opts.Debug {
		args = append(args, "--debug")
	}
	p, err := c.sup.start("function", c.Bin.Function, args, nil)
	if err != nil {
		return err
	}
	if err := c.waitFor(ctx, p, 30*time.Second, errFunctionUp, func(ctx context.Context) (bool, error) {
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return false, nil
		}
		_ = conn.Close()
		return true, nil
	}); err != nil {
		return err
	}
	return c.registerFunction(ctx, "dns:///"+addr)
}

func (c *Cluster) registerFunction(ctx context.Context, endpoint string) error {
	fr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1",
		"kind":       "FunctionRevision",
		"metadata": map[string]any{
			"name":        FunctionName + "-local",
			"labels":      map[string]any{labelPackage: FunctionName},
			"annotations": map[string]any{annotationPause: "true"},
		},
		"spec": map[string]any{
			"desiredState": "Active",
			"image":        "xpkg.egressproxy.io/local/" + FunctionName + ":v0.0.0-dev",
			"revision":     int64(1),
		},
	}}
	if err := c.Client.Create(ctx, fr); client.IgnoreAlreadyExists(err) != nil {
		return errors.Wrap(err, errFnRevision)
	}
	p := client.MergeFrom(fr.DeepCopy())
	_ = unstructured.SetNestedField(fr.Object, endpoint, "status", "endpoint")
	_ = unstructured.SetNestedStringSlice(fr.Object, []string{"composition"}, "status", "capabilities")
	return errors.Wrap(c.Client.Status().Patch(ctx, fr, p), errFnRevStatus)
}

// writeFunctionTLS writes tls.crt and tls.key for localhost and 127.0.0.1,
// signed by Crossplane's CA, and the CA as ca.crt, which also verifies
// core's client certificate.
func (c *Cluster) writeFunctionTLS(ctx context.Context, dir string) error {
	s := &corev1.Secret{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: CrossplaneNamespace, Name: secretCA}, s); err != nil {
		return errors.Wrap(err, errGetSecret)
	}
	for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		if len(s.Data[k]) == 0 {
			return errors.Errorf(errFmtNoCAField, CrossplaneNamespace, secretCA, k)
		}
	}
	ca, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return errors.Wrap(err, errParseCA)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return errors.Wrap(err, errParseCA)
	}
	certPEM, keyPEM, err := serverCert(caCert, ca.PrivateKey)
	if err != nil {
		return errors.Wrap(err, errSignCert)
	}
	for name, data := range map[string][]byte{"ca.crt": s.Data[corev1.TLSCertKey], "tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return errors.Wrap(err, errWriteCert)
		}
	}
	return nil
}

// serverCert returns a PEM certificate and key for localhost and 127.0.0.1,
// good for a day, signed by the CA.
func serverCert(ca *x509.Certificate, caKey any) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: FunctionName},
		DNSNames:     []string{"localhost", FunctionName},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), nil
}
