/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package libvirtd

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

const (
	// sshdAddr is where sshd listens, on the sandbox's loopback: nothing
	// outside the sandbox's network namespace routes there, and its VMs
	// (on the NAT network) cannot reach it. Clients come through Dial.
	sshdAddr = "127.0.0.1:22"
	// SSHUser logs in: the sandbox's socket is root's (mode 0770).
	SSHUser          = "root"
	sshdStartTimeout = 30 * time.Second
	sshdStopGrace    = 10 * time.Second

	errFmtSSHDExited = "sshd exited (%v)"
	errFmtNoLogin    = "no login within %s"
)

// sshdConfig is sshd_config for the sandbox's sshd: public key logins of
// one user, local forwarding (qemu+ssh opens the daemon's socket with a
// direct-streamlocal channel), no passwords, TTYs, agent, X11 or remote
// forwarding. AllowTcpForwarding must allow local forwarding too: with
// "no", OpenSSH (9.2) refuses forwarding to unix sockets as well ("the
// request was denied"), and PermitOpen, which could narrow TCP, narrows
// socket paths away with it. StrictModes is off because the files live
// under a temporary directory (/tmp is world-writable, which sshd's path
// check refuses); UsePAM is off because only the key counts.
const sshdConfig = `# Written by internal/testenv/libvirtd (sshd.go) for one sandbox.
ListenAddress ` + sshdAddr + `
HostKey {{dir}}/ssh_host_ed25519_key
AuthorizedKeysFile {{dir}}/authorized_keys
PidFile {{dir}}/sshd.pid
StrictModes no
UsePAM no
AllowUsers ` + SSHUser + `
PermitRootLogin prohibit-password
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
HostbasedAuthentication no
AllowStreamLocalForwarding local
AllowTcpForwarding local
AllowAgentForwarding no
X11Forwarding no
PermitTunnel no
PermitTTY no
PermitUserRC no
LogLevel VERBOSE
`

// SSHD is a real OpenSSH sshd on the sandbox's libvirt host, as a remote
// libvirt host runs one: clients reach the daemon's socket over qemu+ssh
// (direct-streamlocal channels), logging in as SSHUser with PrivateKey.
type SSHD struct {
	// PrivateKey is the one client key it accepts, unencrypted, in
	// OpenSSH PEM form.
	PrivateKey []byte
	// HostKey is its host key, new for each sshd.
	HostKey ssh.PublicKey
	// Log holds what it logs: a line "Accepted publickey for root" per
	// login.
	Log string

	netNS string
	cmd   *exec.Cmd
	done  chan struct{}
	err   error
}

// StartSSHD runs OpenSSH's sshd in the sandbox's mount and network
// namespaces, listening on the sandbox's loopback (reached with Dial), with
// a new host key and client key, and stops it at the test's cleanup. It
// returns once a client logged in, the host key checked, and opened the
// daemon's socket through it. It skips the test (fails it when CI=true)
// when sshd is not installed (Debian package openssh-server).
func (d *Daemon) StartSSHD(t testing.TB) *SSHD {
	t.Helper()
	bin := sshdPath(t)
	if _, err := user.Lookup("sshd"); err != nil {
		testenv.Missing(t, "the sshd privilege separation user is missing (Debian package openssh-server: hack/deps.sh sshd)")
	}
	nsenter := testenv.LookPath(t, "nsenter", "util-linux")
	dir := filepath.Join(d.Base, "sshd")
	s, err := sshdFiles(dir)
	if err != nil {
		t.Fatalf("cannot write the sshd configuration: %v", err)
	}
	s.Log = filepath.Join(d.Base, "log", "sshd.log")
	s.netNS = d.NetNS(t)
	f, err := os.OpenFile(s.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatalf("cannot create the sshd log: %v", err)
	}
	defer f.Close() //nolint:errcheck // The child has its own copy.
	// sshd chroots its unprivileged child into /run/sshd, which Debian's
	// unit makes: the sandbox's /run is its own tmpfs. sshd re-executes
	// itself for each connection, so it needs its absolute path.
	s.cmd = exec.Command(nsenter, "--mount="+d.MountNS(t), "--net="+s.netNS, "--", //nolint:gosec // Our own paths.
		"/bin/sh", "-c", `mkdir -p -m 0755 /run/sshd && exec "$0" "$@"`, bin, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	s.cmd.Stdout, s.cmd.Stderr = f, f
	// Its own process group: a Ctrl-C reaches only the test, which stops
	// it in order. If the test dies instead, stopping the sandbox kills
	// it, as it lives in the sandbox's network namespace.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("cannot start sshd: %v", err)
	}
	s.done = make(chan struct{})
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			b, _ := os.ReadFile(s.Log)
			t.Logf("--- %s\n%s", s.Log, b)
		}
	})
	if err := s.waitReady(d.Socket); err != nil {
		b, _ := os.ReadFile(s.Log)
		t.Fatalf("sshd in the sandbox %s: %v\n%s", d.Base, err, b)
	}
	return s
}

// PID is sshd's process ID on the host.
func (s *SSHD) PID() int { return s.cmd.Process.Pid }

// Stop stops sshd: SIGTERM to its process group (the listener and its
// connections' processes), then SIGKILL after a grace period. Idempotent.
func (s *SSHD) Stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(sshdStopGrace):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// Dial connects to sshd inside the sandbox's network namespace: a
// forwarder calls it for each connection it relays.
func (s *SSHD) Dial() (net.Conn, error) {
	var c net.Conn
	err := testenv.InNetNS(s.netNS, func() error {
		var err error
		c, err = net.DialTimeout("tcp", sshdAddr, 10*time.Second)
		return err
	})
	return c, err
}

// KnownHostsFor returns a known_hosts line of its host key for the address
// (host:port) a client dials, such as a forwarder's.
func (s *SSHD) KnownHostsFor(addr string) []byte {
	return []byte(knownhosts.Line([]string{knownhosts.Normalize(addr)}, s.HostKey) + "\n")
}

// sshdPath finds sshd, which is in /usr/sbin, often not on a user's PATH.
func sshdPath(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("sshd"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
	}
	if _, err := os.Stat("/usr/sbin/sshd"); err == nil {
		return "/usr/sbin/sshd"
	}
	testenv.Missing(t, "sshd not found (Debian package openssh-server: hack/deps.sh sshd)")
	return ""
}

// sshdFiles writes sshd_config, a new host key and the authorized key of a
// new client key into dir.
func sshdFiles(dir string) (*SSHD, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	_, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		return nil, err
	}
	clientSigner, err := ssh.NewSignerFromKey(clientPriv)
	if err != nil {
		return nil, err
	}
	hostPEM, err := ssh.MarshalPrivateKey(hostPriv, "")
	if err != nil {
		return nil, err
	}
	clientPEM, err := ssh.MarshalPrivateKey(clientPriv, "")
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		// 0600 for all: sshd refuses a host key others can read.
		"ssh_host_ed25519_key": pem.EncodeToMemory(hostPEM),
		"authorized_keys":      ssh.MarshalAuthorizedKey(clientSigner.PublicKey()),
		"sshd_config":          []byte(strings.ReplaceAll(sshdConfig, "{{dir}}", dir)),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	return &SSHD{PrivateKey: pem.EncodeToMemory(clientPEM), HostKey: hostSigner.PublicKey()}, nil
}

// waitReady waits until a client logs in with the key, the host key
// checked, and opens socket through sshd, or sshd exits.
func (s *SSHD) waitReady(socket string) error {
	signer, err := ssh.ParsePrivateKey(s.PrivateKey)
	if err != nil {
		return err
	}
	cfg := &ssh.ClientConfig{User: SSHUser, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: ssh.FixedHostKey(s.HostKey)}
	deadline := time.Now().Add(sshdStartTimeout)
	for {
		err = s.probe(cfg, socket)
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return errors.Errorf(errFmtSSHDExited, s.err)
		default:
		}
		if time.Now().After(deadline) {
			return errors.Wrapf(err, errFmtNoLogin, sshdStartTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *SSHD) probe(cfg *ssh.ClientConfig, socket string) error {
	conn, err := s.Dial()
	if err != nil {
		return err
	}
	defer conn.Close() //nolint:errcheck // A probe.
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	cc, chans, reqs, err := ssh.NewClientConn(conn, sshdAddr, cfg)
	if err != nil {
		return err
	}
	cl := ssh.NewClient(cc, chans, reqs)
	defer cl.Close() //nolint:errcheck // A probe.
	lc, err := cl.Dial("unix", socket)
	if err != nil {
		return err
	}
	return lc.Close()
}
