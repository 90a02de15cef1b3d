/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package dialer turns a provider config's libvirt URI and credentials into
// a go-libvirt dialer: a local unix socket, SSH with a key and a mandatory
// known_hosts check, or TLS with a client certificate. Credentials come from
// memory (a Secret), never from files on the provider's disk, and nothing
// falls back to an unverified host.
package dialer

import (
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// Keys of a credentials Secret.
const (
	KeySSHPrivateKey = "ssh-privatekey"
	KeyKnownHosts    = "known_hosts"
	KeyTLSCert       = "tls.crt"
	KeyTLSKey        = "tls.key"
	KeyCACert        = "ca.crt"
)

// Defaults of libvirt's remote transports.
const (
	DefaultSocket  = "/var/run/libvirt/libvirt-sock"
	DefaultSSHPort = "22"
	DefaultSSHUser = "root"
	DefaultTLSPort = "16514"
	// DialTimeout bounds connecting and the TLS or SSH handshake.
	DialTimeout = 15 * time.Second
)

const (
	errFmtParseURI      = "cannot parse the libvirt URI %q"
	errFmtScheme        = "unsupported libvirt URI scheme %q: want qemu, test, qemu+unix, test+unix, qemu+ssh or qemu+tls"
	errFmtNoHost        = "the libvirt URI %q names no host"
	errFmtRemoteSocket  = "a local libvirt URI %q must not name a host"
	errFmtMissingSecret = "the %s transport needs the Secret keys %s"

	errFmtNamespacedLocal   = "spec.uri: a namespaced ProviderConfig must reach libvirt over qemu+ssh:// or qemu+tls:// to a host, not the %s transport: the provider's own sockets are only for a ClusterProviderConfig"
	errNamespacedSocketPath = "spec.socketPath: a namespaced ProviderConfig cannot name a socket: the provider's own sockets are only for a ClusterProviderConfig"
	errFmtNamespacedAddr    = "a namespaced ProviderConfig may not reach %s: loopback, link-local and unspecified addresses are the provider's own, its node's or the metadata server's"
)

// Credentials for a remote libvirt daemon, as read from a Secret.
type Credentials struct {
	// SSHPrivateKey is an unencrypted private key in PEM or OpenSSH form.
	SSHPrivateKey []byte
	// KnownHosts holds the host's public keys, in OpenSSH known_hosts form.
	KnownHosts []byte
	// TLSCert and TLSKey are the PEM client certificate and key.
	TLSCert []byte
	TLSKey  []byte
	// CACert is the PEM CA bundle the server certificate must chain to.
	CACert []byte
}

// CredentialsFromSecret reads Credentials from the data of a Secret.
func CredentialsFromSecret(data map[string][]byte) Credentials {
	return Credentials{
		SSHPrivateKey: data[KeySSHPrivateKey],
		KnownHosts:    data[KeyKnownHosts],
		TLSCert:       data[KeyTLSCert],
		TLSKey:        data[KeyTLSKey],
		CACert:        data[KeyCACert],
	}
}

// Target is a libvirt daemon and how to reach it.
type Target struct {
	// URI such as qemu:///system, qemu+ssh://user@host/system or
	// qemu+tls://host/system.
	URI string
	// SocketPath of a local socket; it wins over the URI's socket parameter.
	SocketPath string
	// Credentials for the ssh and tls transports.
	Credentials Credentials
	// Namespaced is a namespaced ProviderConfig's target: the dialer
	// refuses loopback, link-local and unspecified addresses, as a name
	// resolves at dial time (see CheckNamespaced).
	Namespaced bool
}

// New returns a dialer for t and the URI to open once connected: the
// driver part of t.URI (qemu:///system, test:///default), as libvirt's own
// client sends it. Every error is Permanent: the config must change.
func New(t Target) (socket.Dialer, golibvirt.ConnectURI, error) {
	u, err := url.Parse(t.URI)
	if err != nil {
		return nil, "", backend.Permanent(errors.Wrapf(err, errFmtParseURI, t.URI))
	}
	driver, _, _ := strings.Cut(u.Scheme, "+")
	if driver != "qemu" && driver != "test" {
		return nil, "", backend.Permanent(errors.Errorf(errFmtScheme, u.Scheme))
	}
	var d socket.Dialer
	switch transportOf(u) {
	case "unix":
		d, err = newLocal(t, u)
	case "ssh":
		d, err = newSSH(t, u)
	case "tls":
		d, err = newTLS(t, u)
	default:
		err = backend.Permanent(errors.Errorf(errFmtScheme, u.Scheme))
	}
	if err != nil {
		return nil, "", err
	}
	return d, golibvirt.RemoteURI(u), nil
}

// transportOf returns the transport of a libvirt URI: the part of the
// scheme after '+', else libvirt's own rule: a host means TLS, no host a
// local socket.
func transportOf(u *url.URL) string {
	_, transport, _ := strings.Cut(u.Scheme, "+")
	switch {
	case transport != "":
		return transport
	case u.Host != "":
		return "tls"
	}
	return "unix"
}

// CheckNamespaced refuses a target that a namespaced ProviderConfig must
// not use: anything but SSH or TLS to a host, and any socketPath. A local
// socket is the provider's own libvirt, with the provider's identity: it is
// for a ClusterProviderConfig only, or any team could run, read and delete
// the platform's VMs. The spec is checked at admission too, but the URI may
// not be all: this runs on what the provider would dial.
func CheckNamespaced(t Target) error {
	if t.SocketPath != "" {
		return backend.Permanent(errors.New(errNamespacedSocketPath))
	}
	u, err := url.Parse(t.URI)
	if err != nil {
		return backend.Permanent(errors.Wrapf(err, errFmtParseURI, t.URI))
	}
	if tr := transportOf(u); tr != "ssh" && tr != "tls" {
		return backend.Permanent(errors.Errorf(errFmtNamespacedLocal, tr))
	}
	// An address is refused here at once; a name, when it resolves to
	// one (netDialer), which no check before the dial can promise.
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil && forbidden(ip) {
		return backend.Permanent(errors.Errorf(errFmtNamespacedAddr, ip))
	}
	return nil
}

// forbidden reports whether a namespaced config may not reach ip: the
// provider's pod and node (loopback, unspecified) and what is only one hop
// away, the metadata server included (link-local). Anything else a team
// could also reach from its own pods.
func forbidden(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsUnspecified() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast()
}

// netDialer connects within DialTimeout; for a namespaced target it refuses
// a forbidden address after resolution, so a name cannot stand in for one
// (and a refusal tells nothing of which ports listen there).
func (t Target) netDialer() *net.Dialer {
	d := &net.Dialer{Timeout: DialTimeout}
	if t.Namespaced {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || forbidden(ap.Addr()) {
				return backend.Permanent(errors.Errorf(errFmtNamespacedAddr, address))
			}
			return nil
		}
	}
	return d
}

// local dials a unix socket on this machine.
type local struct{ path string }

func newLocal(t Target, u *url.URL) (socket.Dialer, error) {
	if u.Host != "" {
		return nil, backend.Permanent(errors.Errorf(errFmtRemoteSocket, t.URI))
	}
	return local{path: socketPath(t.SocketPath, u)}, nil
}

// Dial connects to the socket.
func (l local) Dial() (net.Conn, error) {
	return net.DialTimeout("unix", l.path, DialTimeout)
}

// socketPath is the explicit path, else the URI's socket parameter, else
// libvirt's default.
func socketPath(explicit string, u *url.URL) string {
	if explicit != "" {
		return explicit
	}
	if s := u.Query().Get("socket"); s != "" {
		return s
	}
	return DefaultSocket
}

func hostPort(t Target, u *url.URL, defaultPort string) (string, error) {
	if u.Hostname() == "" {
		return "", backend.Permanent(errors.Errorf(errFmtNoHost, t.URI))
	}
	port := u.Port()
	if port == "" {
		port = defaultPort
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}
