/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package dialer

import (
	"testing"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/dialer/dialertest"
)

func tlsCreds(p dialertest.PKI) Credentials {
	return Credentials{TLSCert: p.ClientCert, TLSKey: p.ClientKey, CACert: p.CACert}
}

func TestTLSDial(t *testing.T) {
	p := dialertest.NewPKI(t)
	addr := dialertest.NewTLSServer(t, p.Server, 1, echoServer(t))
	d, uri, err := New(Target{URI: "qemu+tls://" + addr + "/system", Credentials: tlsCreds(p)})
	if err != nil {
		t.Fatal(err)
	}
	if uri != "qemu:///system" {
		t.Errorf("remote URI: got %q", uri)
	}
	roundTrip(t, d)
}

func TestTLSRefused(t *testing.T) {
	p := dialertest.NewPKI(t)
	addr := dialertest.NewTLSServer(t, p.Server, 0, echoServer(t))
	d, _, err := New(Target{URI: "qemu+tls://" + addr + "/system", Credentials: tlsCreds(p)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Dial()
	if err == nil {
		_ = c.Close()
		t.Fatal("Dial succeeded although libvirtd refused the certificate")
	}
	if got := backend.ClassOf(err); got != backend.ClassPermanent {
		t.Errorf("class: want Permanent, got %s (%v)", got, err)
	}
}

func TestTLSUntrustedServer(t *testing.T) {
	p := dialertest.NewPKI(t)
	other := dialertest.NewPKI(t)
	addr := dialertest.NewTLSServer(t, p.Server, 1, echoServer(t))
	creds := tlsCreds(p)
	creds.CACert = other.CACert
	d, _, err := New(Target{URI: "qemu+tls://" + addr + "/system", Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := d.Dial(); err == nil {
		_ = c.Close()
		t.Fatal("Dial trusted a server certificate from another CA")
	}
}
