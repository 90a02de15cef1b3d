/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package install

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The harness is the External package runtime: with --package-runtime=External
// Crossplane runs no runtime hooks, so nothing creates the revisions' TLS
// Secrets or reports them on the revision, and a revision waits forever
// ("waiting for package runtime controller to set revision's webhook TLS
// secret"). externalRuntime does exactly what the Deployment runtime's Pre
// hooks of Crossplane v2.4.2 do (internal/controller/pkg/runtime,
// runtime_provider.go and runtime_function.go) and nothing more:
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
//     its Service; the harness sets dns:///<package>.<namespace>:<port>,
//     the port it serves the function on (core resolves the name to
//     loopback through its private /etc/hosts, see startCrossplane), and
//     none before it runs the function.
//
// It creates no Service here. Running the binaries, with the
// ServiceAccount and Deployment the Deployment runtime's Post hook would
// create for a ProviderRevision, is workloads' part (workload_test.go).

// externalRuntime keeps doing the runtime hooks' work until ctx is done.
// endpoint returns a function's endpoint from its package name, "" for none;
// nil means no function is served.
func externalRuntime(ctx context.Context, t *testing.T, c client.Client, endpoint func(pkg string) string) {
	t.Helper()
	ca, key, caPEM, err := rootCA(ctx, c)
	if err != nil {
		t.Fatalf("external runtime: %v", err)
	}
	go func() {
		for {
			for _, gvk := range []schema.GroupVersionKind{gvProviderRevision, gvFunctionRevision} {
				revs, err := list(ctx, c, gvk)
				if err != nil {
					continue
				}
				for i := range revs {
					err := hooks(ctx, c, &revs[i], gvk == gvFunctionRevision, endpoint, ca, key, caPEM)
					if err != nil && ctx.Err() == nil {
						t.Logf("external runtime: %s %s: %v", gvk.Kind, revs[i].GetName(), err)
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
}

// hooks does the Pre hook's work for one revision.
func hooks(ctx context.Context, c client.Client, rev *unstructured.Unstructured, function bool, endpoint func(string) string,
	ca *x509.Certificate, key any, caPEM []byte) error {
	if s, _, _ := unstructured.NestedString(rev.Object, "spec", "desiredState"); s != "Active" {
		return nil
	}
	svc := rev.GetLabels()[labelPackage]
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
	if err := ensureCert(ctx, c, server, owner, ca, key, caPEM, serviceDNSNames(svc), x509.ExtKeyUsageServerAuth); err != nil {
		return err
	}
	status := map[string]any{"tlsServerSecretName": server}
	if !function {
		if err := ensureCert(ctx, c, clientSecret, owner, ca, key, caPEM, []string{rev.GetName()}, x509.ExtKeyUsageClientAuth); err != nil {
			return err
		}
		status["tlsClientSecretName"] = clientSecret
	} else {
		if clientSecret != "" {
			status["tlsClientSecretName"] = clientSecret
		}
		if endpoint != nil && endpoint(svc) != "" {
			status["endpoint"] = endpoint(svc)
		}
	}
	current, _, _ := unstructured.NestedMap(rev.Object, "status")
	changed := false
	for k, v := range status {
		if current[k] != v {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"status": status})
	return client.IgnoreNotFound(c.Status().Patch(ctx, rev, client.RawPatch(types.MergePatchType, b)))
}

// serviceDNSNames are initializer.DNSNamesForService's names.
func serviceDNSNames(svc string) []string {
	return []string{svc, svc + "." + xpNamespace, svc + "." + xpNamespace + ".svc"}
}

// ensureCert creates a TLS Secret signed by Crossplane's root CA, unless it
// already holds a certificate.
func ensureCert(ctx context.Context, c client.Client, name string, owner metav1.OwnerReference, ca *x509.Certificate, caKey any,
	caPEM []byte, dnsNames []string, usage x509.ExtKeyUsage) error {
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: xpNamespace, Name: name}, s)
	if err == nil && len(s.Data[corev1.TLSCertKey]) > 0 {
		return nil
	}
	if err != nil && !kerrors.IsNotFound(err) {
		return err
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: dnsNames[0], Organization: []string{"Crossplane"}},
		DNSNames:     dnsNames,
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
	if err != nil {
		return err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return err
	}
	data := map[string][]byte{
		corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}),
		"ca.crt":                caPEM,
	}
	if s.GetName() == "" {
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: xpNamespace, Name: name,
			OwnerReferences: []metav1.OwnerReference{owner}}, Data: data}
		return client.IgnoreAlreadyExists(c.Create(ctx, s))
	}
	s.Data = data
	return c.Update(ctx, s)
}

// rootCA reads the CA core init made.
func rootCA(ctx context.Context, c client.Client) (*x509.Certificate, any, []byte, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: xpNamespace, Name: secretCA}, s); err != nil {
		return nil, nil, nil, err
	}
	cb, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	kb, _ := pem.Decode(s.Data[corev1.TLSPrivateKeyKey])
	if cb == nil || kb == nil {
		return nil, nil, nil, errors.New("secret " + secretCA + " holds no PEM certificate and key")
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
		return nil, nil, nil, errors.New("cannot parse the key of " + secretCA)
	}
	return ca, key, s.Data[corev1.TLSCertKey], nil
}
