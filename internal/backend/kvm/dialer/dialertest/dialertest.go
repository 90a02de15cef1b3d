/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package dialertest runs in-process SSH and TLS servers on loopback that
// forward to a unix socket, as sshd and libvirtd's TLS port do, so tests can
// reach a private libvirtd (or an echo server) over qemu+ssh and qemu+tls.
package dialertest

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHServer accepts one client key and forwards direct-streamlocal channels
// (what libvirt's qemu+ssh and `ssh -L` to a socket use) to a unix socket.
type SSHServer struct {
	// Addr is host:port on 127.0.0.1.
	Addr string
	// PrivateKey is the client key it accepts, in OpenSSH PEM form.
	PrivateKey []byte
	// KnownHosts lists the server's host key for Addr.
	KnownHosts []byte
	// HostKey is the server's public key.
	HostKey ssh.PublicKey
}

// NewSSHServer starts a server forwarding every socket path to socket; with
// socket "" it refuses channels. The test's cleanup stops it.
func NewSSHServer(t testing.TB, socket string) SSHServer {
	t.Helper()
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	_, clientPriv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(clientPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	clientSigner, _ := ssh.NewSignerFromKey(clientPriv)
	allowed := string(clientSigner.PublicKey().Marshal())
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if string(k.Marshal()) == allowed {
				return nil, nil
			}
			return nil, io.EOF
		},
	}
	cfg.AddHostKey(hostSigner)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go serveSSH(l, cfg, socket)
	addr := l.Addr().String()
	return SSHServer{
		Addr:       addr,
		PrivateKey: pem.EncodeToMemory(block),
		KnownHosts: []byte(knownhosts.Line([]string{knownhosts.Normalize(addr)}, hostSigner.PublicKey()) + "\n"),
		HostKey:    hostSigner.PublicKey(),
	}
}

func serveSSH(l net.Listener, cfg *ssh.ServerConfig, socket string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
			if err != nil {
				_ = c.Close()
				return
			}
			defer sc.Close() //nolint:errcheck // Test server.
			go ssh.DiscardRequests(reqs)
			for nc := range chans {
				go forwardChannel(nc, socket)
			}
		}()
	}
}

func forwardChannel(nc ssh.NewChannel, socket string) {
	var req struct {
		SocketPath string
		Reserved0  string
		Reserved1  uint32
	}
	if nc.ChannelType() != "direct-streamlocal@openssh.com" || socket == "" ||
		ssh.Unmarshal(nc.ExtraData(), &req) != nil {
		_ = nc.Reject(ssh.UnknownChannelType, "unsupported")
		return
	}
	up, err := net.Dial("unix", socket)
	if err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		_ = up.Close()
		return
	}
	go ssh.DiscardRequests(reqs)
	go func() {
		_, _ = io.Copy(ch, up)
		_ = ch.CloseWrite()
	}()
	_, _ = io.Copy(up, ch)
	_ = up.Close()
	_ = ch.Close()
}

// PKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, as a libvirt TLS setup has.
type PKI struct {
	// Server requires and verifies a client certificate of the CA.
	Server *tls.Config
	// ClientCert, ClientKey and CACert are PEM, as a Secret holds them.
	ClientCert []byte
	ClientKey  []byte
	CACert     []byte
}

// NewPKI makes a PKI.
func NewPKI(t testing.TB) PKI {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage) ([]byte, []byte) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kDER, _ := x509.MarshalECPrivateKey(k)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kDER})
	}
	sCert, sKey := leaf(2, x509.ExtKeyUsageServerAuth)
	cCert, cKey := leaf(3, x509.ExtKeyUsageClientAuth)
	pair, err := tls.X509KeyPair(sCert, sKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return PKI{
		Server:     &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12},
		ClientCert: cCert,
		ClientKey:  cKey,
		CACert:     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
	}
}

// NewTLSServer answers like libvirtd's TLS port: after the handshake it
// sends verdict (1 accepts the client), then forwards to socket. It returns
// the server's host:port; the test's cleanup stops it.
func NewTLSServer(t testing.TB, cfg *tls.Config, verdict byte, socket string) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go serveTLS(c.(*tls.Conn), verdict, socket)
		}
	}()
	return l.Addr().String()
}

func serveTLS(c *tls.Conn, verdict byte, socket string) {
	defer c.Close() //nolint:errcheck // Test server.
	if err := c.Handshake(); err != nil {
		return
	}
	if _, err := c.Write([]byte{verdict}); err != nil || verdict != 1 {
		return
	}
	up, err := net.Dial("unix", socket)
	if err != nil {
		return
	}
	defer up.Close() //nolint:errcheck // Test server.
	go func() { _, _ = io.Copy(up, c) }()
	_, _ = io.Copy(c, up)
}
