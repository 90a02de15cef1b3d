/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package dialer

import (
	"net"
	"net/url"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/digitalocean/go-libvirt/socket"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

const (
	errParseKey        = "cannot parse the SSH private key (it must not be encrypted)"
	errParseKnownHosts = "cannot parse known_hosts"
	errFmtUnknownHost  = "known_hosts has no key for %s: host key verification is mandatory"
	errSSHDial         = "cannot connect over SSH"
	errFmtRemoteSock   = "cannot reach the libvirt socket %s over SSH"
)

// sshDialer reaches a remote libvirt socket through an SSH connection, as
// libvirt's qemu+ssh transport does, without shelling out to ssh.
type sshDialer struct {
	addr   string
	socket string
	config *ssh.ClientConfig
	// timeout bounds the whole dial: connect, handshake and opening the
	// remote socket (DialTimeout).
	timeout time.Duration
	net     *net.Dialer
}

func newSSH(t Target, u *url.URL) (socket.Dialer, error) {
	c := t.Credentials
	if len(c.SSHPrivateKey) == 0 || len(c.KnownHosts) == 0 {
		return nil, backend.Permanent(errors.Errorf(errFmtMissingSecret, "ssh", KeySSHPrivateKey+" and "+KeyKnownHosts))
	}
	addr, err := hostPort(t, u, DefaultSSHPort)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(c.SSHPrivateKey)
	if err != nil {
		return nil, backend.Permanent(errors.Wrap(err, errParseKey))
	}
	// Parsed in memory: the provider may run with a read-only root file
	// system and no writable TMPDIR.
	db, err := parseKnownHosts(c.KnownHosts)
	if err != nil {
		return nil, backend.Permanent(err)
	}
	algos, err := hostKeyAlgorithms(db, addr)
	if err != nil {
		return nil, err
	}
	user := u.User.Username()
	if user == "" {
		user = DefaultSSHUser
	}
	return &sshDialer{
		addr:   addr,
		socket: socketPath("", u),
		config: &ssh.ClientConfig{
			User:              user,
			Auth:              []ssh.AuthMethod{ssh.PublicKeys(signer)},
			HostKeyCallback:   db.callback,
			HostKeyAlgorithms: algos,
		},
		timeout: DialTimeout,
		net:     t.netDialer(),
	}, nil
}

// Dial opens an SSH connection and, through it, the remote unix socket.
// ssh.Dial's timeout covers only the connect: a host that accepts and never
// sends a banner, or never answers the channel request, held the dial, its
// goroutine and its socket forever. A deadline on the socket bounds it all.
func (s *sshDialer) Dial() (net.Conn, error) {
	tcp, err := s.net.Dial("tcp", s.addr)
	if err != nil {
		return nil, errors.Wrap(err, errSSHDial)
	}
	_ = tcp.SetDeadline(time.Now().Add(s.timeout))
	cc, chans, reqs, err := ssh.NewClientConn(tcp, s.addr, s.config)
	if err != nil {
		_ = tcp.Close()
		return nil, errors.Wrap(err, errSSHDial)
	}
	client := ssh.NewClient(cc, chans, reqs)
	c, err := client.Dial("unix", s.socket)
	if err != nil {
		_ = client.Close()
		return nil, errors.Wrapf(err, errFmtRemoteSock, s.socket)
	}
	// From here on a call that hangs is Conn's to end (see libvirt.Conn).
	_ = tcp.SetDeadline(time.Time{})
	return &sshConn{Conn: c, client: client}, nil
}

// sshConn closes the SSH connection with the forwarded socket, which
// go-libvirt's own SSH dialer leaks.
type sshConn struct {
	net.Conn
	client *ssh.Client
}

// Close closes the forwarded socket and the SSH connection.
func (c *sshConn) Close() error {
	err := c.Conn.Close()
	_ = c.client.Close()
	return err
}

// hostKeyAlgorithms returns the algorithms of the keys known_hosts holds for
// addr. Without them the server picks its preferred host key, which fails
// verification when known_hosts lists another of its keys.
func hostKeyAlgorithms(db *knownHosts, addr string) ([]string, error) {
	keys := db.keysFor(addr)
	if len(keys) == 0 {
		return nil, backend.Permanent(errors.Errorf(errFmtUnknownHost, knownhosts.Normalize(addr)))
	}
	var algos []string
	seen := map[string]bool{}
	for _, k := range keys {
		for _, a := range algorithmsFor(k.Type()) {
			if !seen[a] {
				seen[a] = true
				algos = append(algos, a)
			}
		}
	}
	return algos, nil
}

// algorithmsFor lists the signature algorithms a key type verifies: an RSA
// key signs with SHA-2 on modern servers, which refuse ssh-rsa (SHA-1).
func algorithmsFor(keyType string) []string {
	if keyType == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{keyType}
}
