/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// TestSquidRunsRestricted runs the real squid the way the built pod spec
// says, without a kubelet: the container's command, as the pod's user with
// no capabilities and no_new_privs, on a read-only root file system where
// only the emptyDirs are writable, the ConfigMap and Secret mounted where the
// spec mounts them, and stdout and stderr pipes owned by root, as a container
// runtime may hand them over. It runs in its own mount, network and PID
// namespaces, so nothing leaves the test's loopback and squid is PID 1, as in
// a container. A shell does the kubelet's mounts as root and setpriv drops to
// the pod's user (SysProcAttr.Credential would drop before the mounts).
func TestSquidRunsRestricted(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root, to mount the pod's volumes in a private mount namespace and drop to the pod's user")
	}
	if _, err := os.Stat(squidBinary); err != nil {
		testenv.Missing(t, "%s (Debian package squid)", squidBinary)
	}
	if setnsSyscall[runtime.GOARCH] == 0 {
		testenv.Missing(t, "the number of setns(2) on %s", runtime.GOARCH)
	}
	setpriv := testenv.LookPath(t, "setpriv", "Debian package util-linux")
	ip := testenv.LookPath(t, "ip", "Debian package iproute2")

	h, err := squid.Htpasswd(testUser, testPassword)
	if err != nil {
		t.Fatal(err)
	}
	o, err := build(desired(func(d *backend.Desired[Params]) {
		d.Proxy.AllowedClientCIDRs = []string{"127.0.0.0/8"}
	}), h)
	if err != nil {
		t.Fatal(err)
	}
	pod := o.deployment.Spec.Template.Spec
	script, dir := kubeletScript(t, pod, o)

	c := pod.Containers[0]
	uid, gid := *pod.SecurityContext.RunAsUser, *pod.SecurityContext.RunAsGroup
	args := append([]string{"-c", script, "kubelet", ip, setpriv,
		"--reuid=" + strconv.FormatInt(uid, 10), "--regid=" + strconv.FormatInt(gid, 10), "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"}, c.Command...)
	cmd := exec.Command("/bin/sh", args...) //nolint:gosec,noctx // The test's own squid; stopped below.
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:   syscall.CLONE_NEWPID,
		Unshareflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET, // Go makes the mounts private first.
	}
	var stdout, stderr logBuffer
	cmd.Stdout, cmd.Stderr = stdout.pipe(t), stderr.pipe(t)
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start squid: %v", err)
	}
	stdout.closeWriter()
	stderr.closeWriter()
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // PID 1 of its namespace: its helpers go with it.
		<-exited
	})

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(c.Ports[0].ContainerPort)))
	waitForSquid(t, cmd.Process.Pid, addr, exited, &stderr)

	if s := procStatus(t, cmd.Process.Pid, "Uid:"); strings.Fields(s)[0] != strconv.FormatInt(uid, 10) {
		t.Errorf("squid runs as %q, want user %d", s, uid)
	}
	if s := procStatus(t, cmd.Process.Pid, "CapEff:"); s != "0000000000000000" {
		t.Errorf("squid has capabilities %s, want none", s)
	}
	auth := func(pw string) string {
		return "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(testUser+":"+pw)) + "\r\n"
	}
	cases := map[string]struct {
		reason string
		header string
		want   string
	}{
		"NoCredentials": {reason: "squid asks for credentials.", want: "407"},
		"WrongPassword": {reason: "basic_ncsa_auth reads the mounted htpasswd and refuses a wrong password.", header: auth("wrong"), want: "407"},
		"Authenticated": {reason: "An authenticated user gets past auth, to the destination allowlist, which refuses loopback.", header: auth(testPassword), want: "403"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := connect(t, cmd.Process.Pid, addr, tc.header); got != tc.want {
				t.Errorf("%s\nCONNECT answered %q, want %s\nstderr:\n%s", tc.reason, got, tc.want, stderr.String())
			}
		})
	}

	// The kubelet stops a container with SIGTERM to its PID 1: squid itself,
	// which stops after shutdown_lifetime, open connections or none.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(shutdownLifetime + 15*time.Second):
		t.Errorf("squid ignored SIGTERM for %s: is it the container's main process?\nstderr:\n%s", shutdownLifetime+15*time.Second, stderr.String())
	}
	// squid flushes its access log at the latest when it stops; the log
	// reaches the container's stdout through the FIFO.
	for _, l := range []*logBuffer{&stdout, &stderr} {
		select {
		case <-l.eof:
		case <-time.After(10 * time.Second):
			t.Errorf("a stream of the container stayed open 10s after squid stopped")
		}
	}
	if !strings.Contains(stdout.String(), `"status":403`) || !strings.Contains(stdout.String(), `"status":407`) {
		t.Errorf("stdout lacks the JSON access log of the requests:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "Starting Squid") {
		t.Errorf("stderr lacks squid's cache log:\n%s", stderr.String())
	}
}

// kubeletScript writes the ConfigMap and Secret of o into a folder and
// returns a shell script that mounts the volumes of pod as a kubelet would,
// makes the root file system read-only and runs its arguments. An image has
// /etc/squid; the copy of the host's keeps the host untouched.
func kubeletScript(t *testing.T, pod corev1.PodSpec, o objects) (string, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "egressproxy-pod-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	write := func(name string, data []byte) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil { //nolint:gosec // Volumes are world readable, as their defaultMode says.
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o444); err != nil { //nolint:gosec // As the volume's defaultMode 0444.
			t.Fatal(err)
		}
	}
	for k, v := range o.configMap.Data {
		write("configmap/"+k, []byte(v))
	}
	for k, v := range o.secret.Data {
		write("secret/"+k, v)
	}
	if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // The pod's user reads the volumes.
		t.Fatal(err)
	}

	// $1 is ip; the rest is the command to run.
	lines := []string{
		"set -e",
		`"$1" link set lo up`,
		"shift",
		"mkdir etc-squid",
		"cp -a /etc/squid/. etc-squid/",
		"mount --bind etc-squid /etc/squid",
	}
	for _, m := range pod.Containers[0].VolumeMounts {
		v := volume(pod.Volumes, m.Name)
		if v == nil {
			t.Fatalf("volume mount %s has no volume", m.Name)
		}
		src := ""
		switch {
		case v.ConfigMap != nil:
			src = filepath.Join(dir, "configmap", m.SubPath)
		case v.Secret != nil:
			src = filepath.Join(dir, "secret", m.SubPath)
		case v.EmptyDir != nil:
			if _, err := os.Stat(m.MountPath); err != nil {
				testenv.Missing(t, "%s, which the squid package makes and the pod mounts an emptyDir on", m.MountPath)
			}
			lines = append(lines, "mount -t tmpfs -o mode=0777 "+m.Name+" "+m.MountPath)
			continue
		default:
			t.Fatalf("volume %s is of a kind the test cannot mount", m.Name)
		}
		// Mount points in the copy of /etc/squid, as the kubelet makes them.
		if fi, err := os.Stat(src); err == nil && fi.IsDir() {
			lines = append(lines, "mkdir -p "+m.MountPath)
		} else {
			lines = append(lines, "[ -e "+m.MountPath+" ] || touch "+m.MountPath)
		}
		lines = append(lines, "mount --bind "+src+" "+m.MountPath)
		if m.ReadOnly {
			lines = append(lines, "mount -o remount,bind,ro "+m.MountPath)
		}
	}
	if ptr.Deref(pod.Containers[0].SecurityContext.ReadOnlyRootFilesystem, false) {
		lines = append(lines, "mount -o remount,bind,ro /")
	}
	lines = append(lines, `exec "$@"`)
	return strings.Join(lines, "\n"), dir
}

// setnsSyscall numbers setns(2), which package syscall does not name, on
// the architectures the tests run on.
var setnsSyscall = map[string]uintptr{"amd64": 308, "arm64": 268}

// inNetns runs fn on a thread in the network namespace of process pid. The
// thread is never unlocked, so it ends with the goroutine and no other
// goroutine runs in that namespace.
func inNetns[T any](t *testing.T, pid int, fn func() T) T {
	t.Helper()
	out := make(chan T, 1)
	errs := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			errs <- err
			return
		}
		defer func() { _ = f.Close() }()
		if _, _, e := syscall.Syscall(setnsSyscall[runtime.GOARCH], f.Fd(), syscall.CLONE_NEWNET, 0); e != 0 {
			errs <- e
			return
		}
		out <- fn()
	}()
	select {
	case err := <-errs:
		t.Fatalf("cannot enter the network namespace of squid: %v", err)
	case v := <-out:
		return v
	}
	panic("unreachable")
}

func waitForSquid(t *testing.T, pid int, addr string, exited <-chan struct{}, stderr *logBuffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := inNetns(t, pid, func() error {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				_ = c.Close()
			}
			return err
		})
		if err == nil {
			return
		}
		select {
		case <-exited:
			t.Fatalf("squid exited before it was ready:\n%s", stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("squid not ready on %s: %v\n%s", addr, err, stderr.String())
		}
	}
}

// connect sends a CONNECT to 127.0.0.1:443 with header and returns the
// status code squid answers.
func connect(t *testing.T, pid int, addr, header string) string {
	t.Helper()
	c, err := inNetns(t, pid, func() result[net.Conn] {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		return result[net.Conn]{c, err}
	}).get()
	if err != nil {
		t.Fatalf("cannot connect to squid: %v", err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(45 * time.Second))
	if _, err := io.WriteString(c, "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n"+header+"\r\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("no answer from squid: %v", err)
	}
	if f := strings.Fields(line); len(f) > 1 {
		return f[1]
	}
	return line
}

type result[T any] struct {
	v   T
	err error
}

func (r result[T]) get() (T, error) { return r.v, r.err }

func procStatus(t *testing.T, pid int, field string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return ""
}

// logBuffer collects one stream of the container through a pipe made by
// root, as a container runtime may make it.
type logBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	w   *os.File
	eof chan struct{}
}

func (l *logBuffer) pipe(t *testing.T) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	l.w, l.eof = w, make(chan struct{})
	go func() {
		defer close(l.eof)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			l.mu.Lock()
			l.b.Write(buf[:n])
			l.mu.Unlock()
			if err != nil {
				_ = r.Close()
				return
			}
		}
	}()
	return w
}

// closeWriter closes the test's copy of the write end once squid has its own.
func (l *logBuffer) closeWriter() { _ = l.w.Close() }

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
