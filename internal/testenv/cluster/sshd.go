/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"golang.org/x/crypto/ssh"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/libvirtd"
)

const (
	errSSHDExpose  = "cannot expose the libvirt host's sshd to the node's pods"
	errSSHDKey     = "cannot parse the key of the libvirt host's sshd"
	errFmtSSHDWait = "the node cannot reach the libvirt socket over SSH at %s (the forwarder into the sandbox): %s"

	sshdWaitTimeout = 30 * time.Second
)

// SSHD is the sandbox's sshd (libvirtd.SSHD) as the node's pods reach it.
type SSHD struct {
	*libvirtd.SSHD
	// User logs in with the key.
	User string
	// Addr is host:port where the node and its pods reach it: node.BridgeIP
	// and the port of a forwarder into the sandbox's network namespace
	// (which has no route to the node's, and must not: its VMs are the
	// proxies).
	Addr string
	// KnownHosts lists its host key for Addr.
	KnownHosts []byte
}

// startSSHD starts OpenSSH's sshd on the sandbox's libvirt host
// (libvirtd.Daemon.StartSSHD) and makes it reachable from the node's pods.
// The watchdog kills it if this process dies; so does stopping the
// sandbox. It returns once a client in the node's network namespace opened
// the daemon's socket over SSH through it.
func (c *Cluster) startSSHD(ctx context.Context, t *testenv.Outside, d *libvirtd.Daemon) (*SSHD, error) {
	s := d.StartSSHD(t)
	c.sup.adopt(s.PID())
	addr, err := c.Node.ExposeDial(s.Dial)
	if err != nil {
		return nil, errors.Wrap(err, errSSHDExpose)
	}
	sshd := &SSHD{SSHD: s, User: libvirtd.SSHUser, Addr: addr, KnownHosts: s.KnownHostsFor(addr)}
	return sshd, c.waitSSHD(ctx, sshd, d.Socket)
}

// waitSSHD waits until a client in the node's network namespace logs in at
// s.Addr with the key, the host key checked, and opens socket.
func (c *Cluster) waitSSHD(ctx context.Context, s *SSHD, socket string) error {
	signer, err := ssh.ParsePrivateKey(s.PrivateKey)
	if err != nil {
		return errors.Wrap(err, errSSHDKey)
	}
	cfg := &ssh.ClientConfig{User: s.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: ssh.FixedHostKey(s.HostKey)}
	why := "no try yet"
	err = c.waitFor(ctx, nil, sshdWaitTimeout, "", func(ctx context.Context) (bool, error) {
		conn, err := c.Node.DialContext(ctx, "tcp", s.Addr)
		if err != nil {
			why = err.Error()
			return false, nil
		}
		defer conn.Close() //nolint:errcheck // A probe.
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		cc, chans, reqs, err := ssh.NewClientConn(conn, s.Addr, cfg)
		if err != nil {
			why = err.Error()
			return false, nil
		}
		cl := ssh.NewClient(cc, chans, reqs)
		defer cl.Close() //nolint:errcheck // A probe.
		lc, err := cl.Dial("unix", socket)
		if err != nil {
			why = err.Error()
			return false, nil
		}
		_ = lc.Close()
		return true, nil
	})
	if err != nil {
		return errors.Errorf(errFmtSSHDWait, s.Addr, why)
	}
	return nil
}
