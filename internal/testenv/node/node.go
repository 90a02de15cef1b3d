/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package node runs a real Kubernetes node for integration tests: containerd
// and runc from Debian and a kubelet hack/tools.sh builds, with the images
// hack/squid-image.sh builds (no registry).
//
// The whole node lives in a network namespace and a private mount namespace
// that the harness creates: the CNI bridge, the pods, and whatever the test
// runs there with InNetNS (an origin server, a client). No packet targets an
// address outside it, and every mount the node makes (overlays, secrets,
// pod network namespaces) vanishes with the namespace. Stop kills what it
// started by PID, the pods' processes by their cgroup, and removes the
// node's cgroups, so the host is left as it was.
package node

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

const (
	errNamespaces = "cannot create the node's namespaces"
	errFmtSetup   = "cannot set up the node's namespaces: %s"
	errFmtImport  = "cannot import the image archive %s: %s"
	errCgroup     = "cannot create the node's cgroups"
	errHolder     = "the namespace holder did not start"
	errFmtNoFile  = "%s did not appear; see %s"
	errFmtStart   = "cannot start %s"
	errFmtForward = "cannot forward %s"
)

// Network of the node's CNI bridge, inside the node's network namespace.
const (
	bridgeName = "cni0"
	bridgeCIDR = "10.88.0.1/16"
	// BridgeIP is the node's address: the kubelet's node IP, and where a
	// test binds servers that pods reach.
	BridgeIP = "10.88.0.1"
	// PodSubnet holds the pods' addresses and the node's.
	PodSubnet = "10.88.0.0/16"
)

// Host folders the node's components insist on; each is a bind mount of a
// private folder inside the node's mount namespace. /run/netns holds the
// pods' network namespaces (containerd bind-mounts each on a file there):
// the mounts vanish with the node's mount namespace, but in the host's
// folder the files stayed behind, a few more with every run.
var privateDirs = []string{
	"/var/lib/kubelet", "/var/log/containers", "/var/log/pods",
	"/run/containerd", "/var/lib/cni", "/var/lib/containerd", "/etc/cni/net.d",
	"/run/netns",
}

// Kernel settings the kubelet writes at start. They are global, so inside
// the namespace each is a bind-mounted file and the host keeps its values.
var sysctls = map[string]string{
	"kernel/panic_on_oops":      "1",
	"kernel/panic":              "10",
	"vm/overcommit_memory":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// Images are what hack/squid-image.sh built.
type Images struct {
	// Dir holds squid.tar and pause.tar.
	Dir string
	// Squid and Pause are the images' references.
	Squid, Pause string
}

// FindImages returns the images hack/squid-image.sh built, or marks the test
// Missing.
func FindImages(t testing.TB) Images {
	t.Helper()
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "squid-image.sh"), "path").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		testenv.Missing(t, "the node images are not built (hack/squid-image.sh)")
	}
	refs, err := os.ReadFile(filepath.Join(dir, "refs")) //nolint:gosec // Our own cache.
	if err != nil {
		t.Fatalf("cannot read the image references: %v", err)
	}
	im := Images{Dir: dir}
	for _, l := range strings.Split(string(refs), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		switch f[0] {
		case "squid":
			im.Squid = f[1]
		case "pause":
			im.Pause = f[1]
		}
	}
	if im.Squid == "" || im.Pause == "" {
		t.Fatalf("%s/refs names no squid or pause image", dir)
	}
	return im
}

// Config of a node.
type Config struct {
	// Name of the Node object.
	Name string
	// Kubelet is the kubelet binary.
	Kubelet string
	Images  Images
	// KubeletArgs are extra flags of the kubelet.
	KubeletArgs []string
	// ClusterDNS is the cluster DNS Service's IP the kubelet gives pods
	// (dnsPolicy ClusterFirst); empty: none.
	ClusterDNS string
	// Registries maps a registry's host:port to the CA file containerd
	// trusts for it.
	Registries map[string]string
	// ControlPlane are the programs of the control plane that Start runs
	// inside the node's network namespace (StartControlPlane).
	ControlPlane ControlPlaneBinaries
}

// Node is a running node.
type Node struct {
	Name string
	// NetNS is the path of the node's network namespace.
	NetNS string
	// ControlPlane is the control plane in the node's network namespace,
	// once StartControlPlane has started it.
	ControlPlane *ControlPlane

	cfg       Config
	dir       string
	listeners []net.Listener // forwarders (Expose, ExposeToHost)
	cgroup    string         // the kubelet's cgroupRoot, one per node
	holder    *exec.Cmd
	procs     []*proc  // containerd, etcd, kube-apiserver, kubelet
	created   []string // host folders the node created for its mounts
	logf      func(format string, args ...any)
}

// A proc is a program the node runs in its namespaces.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts a node with a control plane of its own, waits until its
// apiserver is ready, starts the kubelet, and stops it all when the test
// ends. It marks the test Missing when containerd, runc, the CNI plugins or
// the images are missing. The node registers itself; the caller waits for
// it to become Ready.
func Start(t testing.TB, cfg Config) *Node {
	t.Helper()
	n := New(t.Context(), t, cfg)
	if _, err := n.StartControlPlane(t.Context(), cfg.ControlPlane); err != nil {
		t.Fatalf("cannot start the node's control plane: %v", err)
	}
	if err := n.StartKubelet(); err != nil {
		t.Fatalf("cannot start the kubelet: %v", err)
	}
	return n
}

// New makes the node's namespaces, its bridge and private folders, and
// starts containerd with the images; StartControlPlane and StartKubelet
// start the rest. The node stops when t's cleanups run. ctx bounds New,
// for a t that has no Context of its own (a testenv.Outside).
func New(ctx context.Context, t testing.TB, cfg Config) *Node {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "a real node needs root")
	}
	for _, p := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "unshare", "nsenter", "ip"} {
		testenv.LookPath(t, p, "hack/deps.sh node")
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		testenv.Missing(t, "the CNI plugins are not installed (hack/deps.sh node)")
	}
	dir, err := os.MkdirTemp("", "egressproxy-node-")
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{Name: cfg.Name, cfg: cfg, dir: dir, logf: t.Logf}
	t.Cleanup(n.Stop)
	if err := n.start(ctx, cfg); err != nil {
		t.Fatalf("cannot start the node: %v", err)
	}
	return n
}

func (n *Node) path(elem ...string) string { return filepath.Join(append([]string{n.dir}, elem...)...) }

func (n *Node) start(ctx context.Context, cfg Config) error {
	// The holder only keeps the namespaces alive; everything else enters
	// them with nsenter, so its PID is known.
	n.holder = exec.Command("unshare", "--net", "--mount", "--propagation", "private", "sleep", "infinity")
	n.holder.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := n.holder.Start(); err != nil {
		return errors.Wrap(err, errNamespaces)
	}
	n.NetNS = fmt.Sprintf("/proc/%d/ns/net", n.holder.Process.Pid)
	if err := n.waitNamespaces(ctx); err != nil {
		return err
	}
	for _, d := range privateDirs {
		if err := n.mkdirAll(d); err != nil {
			return err
		}
	}
	if err := n.makeCgroups(); err != nil {
		return err
	}
	if err := n.writeFiles(cfg); err != nil {
		return err
	}
	if out, err := n.nsenter("sh", "-ec", n.setupScript()).CombinedOutput(); err != nil {
		return errors.Wrapf(err, errFmtSetup, out)
	}
	if err := n.startProc("containerd", "containerd", "--config", n.path("containerd.toml")); err != nil {
		return err
	}
	if err := n.waitFile(ctx, n.path("containerd.sock")); err != nil {
		return err
	}
	for _, tar := range []string{"pause.tar", "squid.tar"} {
		out, err := n.nsenter("ctr", "--address", n.path("containerd.sock"), "-n", "k8s.io", "images", "import",
			"--no-unpack", filepath.Join(cfg.Images.Dir, tar)).CombinedOutput()
		if err != nil {
			return errors.Wrapf(err, errFmtImport, tar, out)
		}
	}
	return nil
}

// StartKubelet starts the kubelet, which registers the node with the
// control plane (StartControlPlane first). Only the cluster's CA's client
// certificates (the apiserver's) may use the kubelet's API: pods on the
// bridge reach its address too.
func (n *Node) StartKubelet() error {
	cp := n.ControlPlane
	if cp == nil {
		return errors.New(errNoControlPlane)
	}
	return n.startProc("kubelet", append([]string{n.cfg.Kubelet,
		"--config", n.path("kubelet.yaml"),
		"--kubeconfig", cp.NodeKubeconfig,
		"--container-runtime-endpoint", "unix://" + n.path("containerd.sock"),
		"--hostname-override", n.Name,
		"--node-ip", BridgeIP,
		"--cert-dir", n.path("kubelet-pki"),
		"--client-ca-file", cp.CAFile,
		"--anonymous-auth=false",
		"--v", "1"}, n.cfg.KubeletArgs...)...)
}

// NetNSArgs are the arguments of nsenter that run a program in the node's
// network namespace (and the host's mount namespace): nsenter -n does not
// fork, so the PID nsenter starts with is the program's.
func (n *Node) NetNSArgs() []string {
	return []string{"-t", strconv.Itoa(n.holder.Process.Pid), "-n", "--"}
}

// makeCgroups creates the kubelet's cgroupRoot in every hierarchy (the
// kubelet requires it to exist): pods of this node live below it, where
// Stop finds them, and other nodes on the host have roots of their own.
func (n *Node) makeCgroups() error {
	n.cgroup = "egressproxy-" + strings.TrimPrefix(filepath.Base(n.dir), "egressproxy-")
	hs, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return errors.Wrap(err, errCgroup)
	}
	for _, h := range hs {
		if !h.IsDir() {
			continue
		}
		d := filepath.Join("/sys/fs/cgroup", h.Name(), n.cgroup)
		if err := os.Mkdir(d, 0o755); err != nil {
			return errors.Wrap(err, errCgroup)
		}
		// A new cpuset has no CPUs and no memory nodes until it is given
		// its parent's.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(filepath.Dir(d), f)); err == nil { //nolint:gosec // cgroupfs.
				if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil { //nolint:gosec // cgroupfs.
					return errors.Wrap(err, errCgroup)
				}
			}
		}
	}
	return nil
}

// mkdirAll creates a host folder a mount needs, remembering every folder
// it creates so that Stop removes them all.
func (n *Node) mkdirAll(d string) error {
	if _, err := os.Stat(d); err == nil {
		return nil
	}
	if err := n.mkdirAll(filepath.Dir(d)); err != nil {
		return err
	}
	if err := os.Mkdir(d, 0o755); err != nil {
		return err
	}
	n.created = append(n.created, d)
	return nil
}

// waitNamespaces waits until the holder has left the host's namespaces.
func (n *Node) waitNamespaces(ctx context.Context) error {
	host, _ := os.Readlink("/proc/self/ns/mnt")
	for range 100 {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", n.holder.Process.Pid)); err == nil && l != host {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return errors.New(errHolder)
}

func (n *Node) waitFile(ctx context.Context, p string) error {
	for range 300 {
		if _, err := os.Stat(p); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.Errorf(errFmtNoFile, p, n.path("containerd.log"))
}

// nsenter returns a command that runs in the node's namespaces. nsenter
// does not fork for these namespaces, so the command's PID is the
// program's.
func (n *Node) nsenter(args ...string) *exec.Cmd {
	pid := fmt.Sprint(n.holder.Process.Pid)
	c := exec.Command("nsenter", append([]string{"-t", pid, "-n", "-m", "--"}, args...)...) //nolint:gosec // Test harness.
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return c
}

func (n *Node) startProc(name string, args ...string) error {
	log, err := os.Create(n.path(name + ".log"))
	if err != nil {
		return err
	}
	c := n.nsenter(args...)
	c.Stdout, c.Stderr = log, log
	if err := c.Start(); err != nil {
		_ = log.Close()
		return errors.Wrapf(err, errFmtStart, name)
	}
	_ = log.Close()
	p := &proc{name: name, cmd: c, done: make(chan struct{})}
	go func() { _ = c.Wait(); close(p.done) }()
	n.procs = append(n.procs, p)
	return nil
}

// exited returns the name of a program of the node that has exited, or "".
func (n *Node) exited() string {
	for _, p := range n.procs {
		select {
		case <-p.done:
			return p.name
		default:
		}
	}
	return ""
}

// Log returns the tail of a component's log ("containerd", "etcd",
// "kube-apiserver", "kubelet").
func (n *Node) Log(name string, lines int) string {
	b, _ := os.ReadFile(n.path(name + ".log")) //nolint:gosec // Our own file.
	l := bytes.Split(b, []byte("\n"))
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return string(bytes.Join(l, []byte("\n")))
}
