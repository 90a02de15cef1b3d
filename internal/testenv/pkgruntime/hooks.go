/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package pkgruntime lets a test harness install this project the way users
// install it, through Crossplane's package manager, with core running
// --package-runtime=External and the harness as that runtime.
//
// With --package-runtime=External Crossplane runs no runtime hooks, so
// nothing creates the revisions' TLS Secrets or reports them on the
// revision, and a revision waits forever ("waiting for package runtime
// controller to set revision's webhook TLS secret"). A Runtime does exactly
// what the Deployment runtime's hooks of Crossplane v2.4.2 do
// (internal/controller/pkg/runtime, runtime_provider.go and
// runtime_function.go) and nothing more:
//   - the server Secret <package>-tls-server: a certificate from Crossplane's
//     root CA for the DNS names of the package's Service; for a
//     ProviderRevision also the client Secret <package>-tls-client for the
//     revision's name; both controlled by the revision. (These are the names
//     the package manager puts in the revision's spec when the runtime is
//     Deployment; with External it leaves spec empty.)
//   - status.tlsServerSecretName and status.tlsClientSecretName naming them,
//     which the revision's establisher waits for;
//   - on a FunctionRevision, status.endpoint: where the runtime serves the
//     function. The Deployment runtime sets dns:///<package>.<namespace>:9443,
//     its Service; a Runtime sets dns:///<package>.<namespace>:<port>, the
//     port it serves the function on (core resolves the name to loopback
//     through a private /etc/hosts, see WithPrivateHosts), and none before
//     it runs the function.
//
// Then it runs the packages' binaries as the Deployment runtime's pods
// would (workloads.go): the provider as its revision's ServiceAccount, the
// function with its revision's server certificate.
package pkgruntime

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Crossplane's namespace, its root CA and the label it puts on revisions.
const (
	// Namespace is where Crossplane runs packages and keeps their Secrets.
	Namespace = "crossplane-system"
	// LabelPackage is the label on a package's revisions naming the package.
	LabelPackage = "pkg.crossplane.io/package"

	secretCA = "crossplane-root-ca"

	errRootCA     = "cannot read Crossplane's root CA"
	errFmtNoPEM   = "Secret %s holds no PEM certificate and key"
	errParseKey   = "cannot parse the key of Crossplane's root CA"
	errFmtHook    = "cannot do the runtime hook's work for %s %s"
	hookEvery     = 500 * time.Millisecond
	certValidity  = 24 * time.Hour
	serialBits    = 62
	activeState   = "Active"
	stateField    = "desiredState"
	statusField   = "status"
	endpointField = "endpoint"
)

// Crossplane's package kinds.
var (
	ProviderRevision = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "ProviderRevision"}
	FunctionRevision = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "FunctionRevision"}
)

// hooks keeps doing the runtime hooks' work until ctx is done.
func (r *Runtime) hooks(ctx context.Context) error {
	ca, key, caPEM, err := rootCA(ctx, r.c)
	if err != nil {
		return errors.Wrap(err, errRootCA)
	}
	go func() {
		for {
			for _, gvk := range []schema.GroupVersionKind{ProviderRevision, FunctionRevision} {
				revs := &unstructured.UnstructuredList{}
				revs.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
				if err := r.c.List(ctx, revs); err != nil {
					continue
				}
				for i := range revs.Items {
					rev := &revs.Items[i]
					if err := r.hook(ctx, rev, gvk == FunctionRevision, ca, key, caPEM); err != nil && ctx.Err() == nil {
						r.logf("%v", errors.Wrapf(err, errFmtHook, gvk.Kind, rev.GetName()))
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(hookEvery):
			}
		}
	}()
	return nil
}

// hook does the Pre hook's work for one revision.
func (r *Runtime) hook(ctx context.Context, rev *unstructured.Unstructured, function bool, ca *x509.Certificate, key any, caPEM []byte) error {
	if s, _, _ := unstructured.NestedString(rev.Object, "spec", stateField); s != activeState {
		return nil
	}
	svc := rev.GetLabels()[LabelPackage]
	if svc == "" {
		return nil
	}
	// With the Deployment runtime the package manager copies the Secret
	// names into the revision's spec; with External it leaves them unset, so
	// use the names it would give them (<package>-tls-server, -tls-client).
	server, _, _ := unstructured.NestedString(rev.Object, "spec", "tlsServerSecretName")
	if server == "" {
		server = svc + "-tls-server"
	}
	clientSecret, _, _ := unstructured.NestedString(rev.Object, "spec", "tlsClientSecretName")
	if clientSecret == "" && !function {
		clientSecret = svc + "-tls-client"
	}
	owner := metav1.OwnerReference{APIVersion: rev.GetAPIVersion(), Kind: rev.GetKind(), Name: rev.GetName(),
		UID: rev.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	if err := ensureCert(ctx, r.c, server, owner, ca, key, caPEM, ServiceDNSNames(svc), x509.ExtKeyUsageServerAuth); err != nil {
		return err
	}
	status := map[string]any{"tlsServerSecretName": server}
	if !function {
		if err := ensureCert(ctx, r.c, clientSecret, owner, ca, key, caPEM, []string{rev.GetName()}, x509.ExtKeyUsageClientAuth); err != nil {
			return err
		}
		status["tlsClientSecretName"] = clientSecret
	} else {
		if clientSecret != "" {
			status["tlsClientSecretName"] = clientSecret
		}
		if e := r.Endpoint(svc); e != "" {
			status[endpointField] = e
		}
	}
	current, _, _ := unstructured.NestedMap(rev.Object, statusField)
	changed := false
	for k, v := range status {
		if current[k] != v {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	b, err := json.Marshal(map[string]any{statusField: status})
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(r.c.Status().Patch(ctx, rev, client.RawPatch(types.MergePatchType, b)))
}

// ServiceDNSNames are the DNS names of a package's Service, as Crossplane's
// initializer.DNSNamesForService makes them.
func ServiceDNSNames(svc string) []string {
	return []string{svc, svc + "." + Namespace, svc + "." + Namespace + ".svc"}
}

// ensureCert creates a TLS Secret signed by Crossplane's root CA, unless it
// already holds a certificate.
func ensureCert(ctx context.Context, c client.Client, name string, owner metav1.OwnerReference, ca *x509.Certificate, caKey any,
	caPEM []byte, dnsNames []string, usage x509.ExtKeyUsage) error {
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, s)
	if err == nil && len(s.Data[corev1.TLSCertKey]) > 0 {
		return nil
	}
	if err != nil && !kerrors.IsNotFound(err) {
		return err
	}
	certPEM, keyPEM, err := signCert(ca, caKey, dnsNames, usage)
	if err != nil {
		return err
	}
	data := map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, "ca.crt": caPEM}
	if s.GetName() == "" {
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name,
			OwnerReferences: []metav1.OwnerReference{owner}}, Data: data}
		return client.IgnoreAlreadyExists(c.Create(ctx, s))
	}
	s.Data = data
	return c.Update(ctx, s)
}

// signCert returns a PEM certificate and key for dnsNames, signed by ca.
func signCert(ca *x509.Certificate, caKey any, dnsNames []string, usage x509.ExtKeyUsage) ([]byte, []byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), serialBits))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: dnsNames[0], Organization: []string{"Crossplane"}},
		DNSNames:     dnsNames,
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), nil
}

// rootCA reads the CA core init made.
func rootCA(ctx context.Context, c client.Client) (*x509.Certificate, any, []byte, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: secretCA}, s); err != nil {
		return nil, nil, nil, err
	}
	cb, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	kb, _ := pem.Decode(s.Data[corev1.TLSPrivateKeyKey])
	if cb == nil || kb == nil {
		return nil, nil, nil, errors.Errorf(errFmtNoPEM, secretCA)
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, nil, err
	}
	var key any
	if k, err := x509.ParsePKCS1PrivateKey(kb.Bytes); err == nil {
		key = k
	} else if k, err := x509.ParsePKCS8PrivateKey(kb.Bytes); err == nil {
		key = k
	} else if k, err := x509.ParseECPrivateKey(kb.Bytes); err == nil {
		key = k
	} else {
		return nil, nil, nil, errors.New(errParseKey)
	}
	return ca, key, s.Data[corev1.TLSCertKey], nil
}
