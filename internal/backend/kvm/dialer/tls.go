/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package dialer

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/url"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/digitalocean/go-libvirt/socket"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

const (
	errKeyPair       = "cannot load the TLS client certificate and key"
	errCA            = "ca.crt holds no PEM certificate"
	errTLSDial       = "cannot connect over TLS"
	errReadVerdict   = "cannot read libvirtd's verdict on the client certificate"
	errCertRefused   = "libvirtd refused the client certificate or this client's address"
	tlsVerdictAccept = 1
)

// tlsDialer reaches libvirtd's TLS port with a client certificate.
type tlsDialer struct {
	addr   string
	config *tls.Config
	net    *net.Dialer
}

func newTLS(t Target, u *url.URL) (socket.Dialer, error) {
	c := t.Credentials
	if len(c.TLSCert) == 0 || len(c.TLSKey) == 0 || len(c.CACert) == 0 {
		return nil, backend.Permanent(errors.Errorf(errFmtMissingSecret, "tls", KeyTLSCert+", "+KeyTLSKey+" and "+KeyCACert))
	}
	addr, err := hostPort(t, u, DefaultTLSPort)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(c.TLSCert, c.TLSKey)
	if err != nil {
		return nil, backend.Permanent(errors.Wrap(err, errKeyPair))
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(c.CACert) {
		return nil, backend.Permanent(errors.New(errCA))
	}
	return &tlsDialer{addr: addr, net: t.netDialer(), config: &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      roots,
		ServerName:   u.Hostname(),
		MinVersion:   tls.VersionTLS12,
	}}, nil
}

// Dial connects and waits for libvirtd's verdict: after the handshake it
// sends one byte saying whether it accepted the client certificate.
func (d *tlsDialer) Dial() (net.Conn, error) {
	c, err := tls.DialWithDialer(d.net, "tcp", d.addr, d.config)
	if err != nil {
		return nil, errors.Wrap(err, errTLSDial)
	}
	// A server that never answers must not hang the dial.
	_ = c.SetReadDeadline(time.Now().Add(DialTimeout))
	b := make([]byte, 1)
	if _, err := c.Read(b); err != nil {
		_ = c.Close()
		return nil, errors.Wrap(err, errReadVerdict)
	}
	if b[0] != tlsVerdictAccept {
		_ = c.Close()
		return nil, backend.Permanent(errors.New(errCertRefused))
	}
	_ = c.SetReadDeadline(time.Time{})
	return c, nil
}
