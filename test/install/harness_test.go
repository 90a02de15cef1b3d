/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package install

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/ociregistry"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/pkgruntime"
)

// Crossplane's namespace and the Secrets core init fills.
const (
	xpNamespace  = "crossplane-system"
	secretCA     = "crossplane-root-ca"
	secretClient = "crossplane-tls-client"
)

// The client logs API warnings (such as "XRD v1 is deprecated") through
// controller-runtime's logger, which complains with a stack trace when unset.
func init() { ctrllog.SetLogger(logr.Discard()) }

// plane is a kube-apiserver with Crossplane core running against it.
type plane struct {
	kube       client.Client
	cfg        *rest.Config
	kubeconfig string
	logDir     string
	// auditLog is the API server's audit log (JSON lines, level Metadata):
	// who made each request, with which user agent.
	auditLog string
}

// auditPolicy records every request's user, verb and object, no bodies.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
`

// startControlPlane starts kube-apiserver and etcd with no CRDs at all: every
// CRD of the provider must come from its package. The API server writes an
// audit log to dir/audit.log.
func startControlPlane(t *testing.T, dir string) (client.Client, *rest.Config, string) {
	t.Helper()
	bin := kube.BinDir()
	if bin == "" {
		testenv.Missing(t, "the envtest binaries are not built (hack/tools.sh build etcd kube-apiserver kubectl)")
	}
	// envtest's 20 s is too short on two busy cores.
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		t.Setenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT", "90s")
	}
	env := &envtest.Environment{BinaryAssetsDirectory: bin}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", filepath.Join(dir, "audit.log")).
		Set("audit-log-format", "json")
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("cannot start kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatalf("cannot create a client: %v", err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := kube.WriteKubeconfig(cfg, kc); err != nil {
		t.Fatalf("cannot write a kubeconfig: %v", err)
	}
	return c, cfg, kc
}

// crossplaneCRDs returns the CRD folder of the Crossplane release core was
// built from, from the Go module cache.
func crossplaneCRDs(ctx context.Context, t *testing.T, core string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, core, "--version").Output()
	if err != nil {
		t.Fatalf("cannot read the version of crossplane-core: %v", err)
	}
	v := strings.TrimSpace(string(out))
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "github.com/crossplane/crossplane/v2@"+v)
	// Outside any module, so the project's go.mod is not touched.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, err = cmd.Output()
	var m struct{ Dir string }
	if err != nil || json.Unmarshal(out, &m) != nil || m.Dir == "" {
		testenv.Missing(t, "Crossplane %s's CRDs are not in the Go module cache (go mod download): %v", v, err)
	}
	return filepath.Join(m.Dir, "cluster", "crds")
}

// startCrossplane runs core init, then core start with the External package
// runtime and reg's CA in its CA bundle, and waits until it is ready.
func startCrossplane(ctx context.Context, t *testing.T, p *plane, core string, reg *ociregistry.Registry, dir string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: xpNamespace}}
	if err := p.kube.Create(ctx, ns); err != nil {
		t.Fatalf("cannot create namespace %s: %v", xpNamespace, err)
	}
	tlsDir := filepath.Join(dir, "tls-client")
	if err := os.MkdirAll(tlsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The flag names come out oddly (--cr-ds-path): use the environment.
	env := []string{
		"KUBECONFIG=" + p.kubeconfig,
		"POD_NAMESPACE=" + xpNamespace,
		"CRDS_PATH=" + crossplaneCRDs(ctx, t, core),
		"ENABLE_WEBHOOKS=false",
		"TLS_CA_SECRET_NAME=" + secretCA,
		"TLS_CLIENT_SECRET_NAME=" + secretClient,
		"TLS_CLIENT_CERTS_DIR=" + tlsDir,
	}
	// The first core init often fails on a stale REST mapper right after it
	// installs the CRDs ("no matches for kind Lock"): run it again.
	var out []byte
	var err error
	for i := 1; i <= 5; i++ {
		cmd := exec.CommandContext(ctx, core, "core", "init")
		cmd.Env = append(os.Environ(), env...)
		if out, err = cmd.CombinedOutput(); err == nil {
			break
		}
		time.Sleep(time.Duration(i) * 500 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("crossplane core init: %v\n%s", err, out)
	}
	// core start will not start without its client certificate, which it
	// uses to call functions.
	s := &corev1.Secret{}
	if err := p.kube.Get(ctx, client.ObjectKey{Namespace: xpNamespace, Name: secretClient}, s); err != nil {
		t.Fatalf("cannot get Secret %s: %v", secretClient, err)
	}
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(tlsDir, k), s.Data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// Core caches package contents here and fails to parse any package
	// ("read/write on closed pipe") when the folder is missing.
	cache := filepath.Join(dir, "xpkg-cache")
	if err := os.MkdirAll(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	health := freePort(t)
	args := []string{"core", "start", "--enable-webhooks=false",
		// No kubelet here: the harness is the runtime (runtime_test.go).
		"--package-runtime=External",
		// A Configuration upgrade rolls the Provider and the Function to
		// the versions its dependsOn asks for (alpha in v2.4).
		"--enable-dependency-version-upgrades",
		// The registry's CA, added to the system roots for package pulls.
		"--ca-bundle-path=" + reg.CAFile,
		"--xpkg-cache-dir=" + cache,
		fmt.Sprintf("--metrics-port=%d", freePort(t)), fmt.Sprintf("--health-probe-port=%d", health),
		"--poll-interval=15s", "--debug",
	}
	// Core reaches the function the harness runs through a private
	// /etc/hosts (pkgruntime.WithPrivateHosts).
	bin, wrapped, err := pkgruntime.WithPrivateHosts(ctx, filepath.Join(dir, "hosts"), []string{functionName}, core, args...)
	if errors.Is(err, pkgruntime.ErrMissing) {
		testenv.Missing(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := spawnEnv(t, filepath.Join(p.logDir, "crossplane.log"), env, bin, wrapped...); err != nil {
		t.Fatalf("cannot start crossplane core: %v", err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", health)
	eventually(t, 60*time.Second, "crossplane core /readyz", func() (bool, string) {
		rsp, err := http.Get(url) //nolint:noctx // A loopback probe.
		if err != nil {
			return false, err.Error()
		}
		_ = rsp.Body.Close()
		return rsp.StatusCode == http.StatusOK, rsp.Status
	})
}

// startRBACManager runs Crossplane's RBAC manager, which the Helm chart runs
// beside core, in a network namespace of its own
// (pkgruntime.StartRBACManager).
func startRBACManager(ctx context.Context, t *testing.T, p *plane, core, dir string) {
	t.Helper()
	u, err := url.Parse(p.cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	spawn := func(name, bin string, args, env []string) (pkgruntime.Process, error) {
		return spawnEnv(t, filepath.Join(p.logDir, name+".log"), env, bin, args...)
	}
	if _, err := pkgruntime.StartRBACManager(ctx, spawn, core, p.kubeconfig, u.Host, dir, "--debug"); err != nil {
		t.Fatalf("cannot start the RBAC manager: %v", err)
	}
}

// proc is a process the harness runs.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// spawnEnv starts bin with env added to the test's environment, logging to
// logFile (appended), and stops it when owner ends; the process is killed
// with the test binary, however that ends.
func spawnEnv(owner *testing.T, logFile string, env []string, bin string, args ...string) (*proc, error) {
	log, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) //nolint:gosec // The test's own log.
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...) //nolint:gosec // The harness's own binaries.
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	// Pdeathsig follows the thread that forks: keep that thread alive for
	// the child's lifetime.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	started := make(chan error)
	go func() {
		runtime.LockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			_ = cmd.Wait()
		}
		_ = log.Close()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	owner.Cleanup(p.Stop)
	return p, nil
}

// Stop ends the process as a kubelet ends a container: SIGTERM, then SIGKILL.
func (p *proc) Stop() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Exited is closed when the process has exited.
func (p *proc) Exited() <-chan struct{} { return p.done }

// PID is the process's ID.
func (p *proc) PID() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() //nolint:errcheck // Only its port is wanted.
	return l.Addr().(*net.TCPAddr).Port
}

// eventually polls cond until it holds, and fails the test with cond's last
// message after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
}

// Crossplane's package kinds.
var (
	gvConfiguration         = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Configuration"}
	gvConfigurationRevision = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "ConfigurationRevision"}
	gvProvider              = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Provider"}
	gvProviderRevision      = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "ProviderRevision"}
	gvFunction              = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Function"}
	gvFunctionRevision      = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "FunctionRevision"}
	gvCRD                   = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	gvMRD                   = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1alpha1", Kind: "ManagedResourceDefinition"}
	gvXRD                   = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "CompositeResourceDefinition"}
	gvComposition           = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "Composition"}
)

// labelPackage is the label Crossplane puts on a package's revisions, naming
// the package.
const labelPackage = "pkg.crossplane.io/package"

func get(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
}

func list(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, opts ...client.ListOption) ([]unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	err := c.List(ctx, l, opts...)
	return l.Items, err
}

// condition returns the status and message of a condition, "" if unset.
func condition(u *unstructured.Unstructured, typ string) (string, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			msg, _ := m["message"].(string)
			r, _ := m["reason"].(string)
			return s, r + ": " + msg
		}
	}
	return "", ""
}

// conditions summarises every condition of u for messages.
func conditions(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var b strings.Builder
	for _, c := range conds {
		m, _ := c.(map[string]any)
		fmt.Fprintf(&b, "[%v=%v %v: %v] ", m["type"], m["status"], m["reason"], m["message"])
	}
	return b.String()
}

// controller returns the kind and name of u's controller owner, if any.
func controller(u *unstructured.Unstructured) (string, string) {
	for _, o := range u.GetOwnerReferences() {
		if o.Controller != nil && *o.Controller {
			return o.Kind, o.Name
		}
	}
	return "", ""
}
