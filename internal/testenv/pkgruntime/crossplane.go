/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package pkgruntime

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

const (
	errFmtNoUnshare = "cannot run crossplane core in a private mount namespace (unshare --mount, needs root): %v: %s"
	errWriteHosts   = "cannot write core's private /etc/hosts"
	errFmtBuild     = "hack/xpkg.sh %s failed: %v\n%s"
	errRBACExited   = "the RBAC manager exited"
	errRBACNetNS    = "the RBAC manager has no network namespace of its own yet"
	errRBACRelay    = "cannot relay the RBAC manager's connections to the API server"
	errNoFreePort   = "cannot find a free port on 127.0.0.1"

	netnsTimeout = 30 * time.Second
)

// ErrMissing wraps what this machine lacks to run core as the runtime
// needs: a test skips (or fails with CI=true) on it.
var ErrMissing = errors.New("missing on this machine")

// WithPrivateHosts returns the command that runs bin with args in a private
// mount namespace whose /etc/hosts maps the Service names of the function
// packages fnPkgs to loopback, written to hostsFile. Core calls a function
// at the endpoint on its FunctionRevision, a Service name
// (dns:///<package>.crossplane-system:<port>) as the Deployment runtime sets
// it and the function's certificate names; there is no cluster DNS here,
// and the Runtime serves functions on loopback.
func WithPrivateHosts(ctx context.Context, hostsFile string, fnPkgs []string, bin string, args ...string) (string, []string, error) {
	names := make([]string, 0, 3*len(fnPkgs))
	for _, p := range fnPkgs {
		names = append(names, ServiceDNSNames(p)...)
	}
	b := "127.0.0.1 localhost\n::1 localhost\n127.0.0.1 " + strings.Join(names, " ") + "\n"
	if err := os.WriteFile(hostsFile, []byte(b), 0o644); err != nil { //nolint:gosec // Read by core, not secret.
		return "", nil, errors.Wrap(err, errWriteHosts)
	}
	if out, err := exec.CommandContext(ctx, "unshare", "--mount", "true").CombinedOutput(); err != nil {
		return "", nil, errors.Wrapf(ErrMissing, errFmtNoUnshare, err, out)
	}
	return "unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$0" /etc/hosts && exec "$@"`, hostsFile, bin}, args...), nil
}

// StartRBACManager runs Crossplane's RBAC manager, which the Helm chart runs
// beside core: it makes each ProviderRevision's ClusterRoles and binds the
// system one to the ServiceAccount of the revision's Deployment. It runs in
// a network namespace of its own, because it serves metrics on :8080 with
// no flag to change that, and two harnesses (the e2e suite, test/install,
// make dev) may run at once; the harness relays connections to the API
// server's loopback address apiServer (host:port) from inside that
// namespace, until ctx is done. kubeconfig must reach the API server at
// apiServer.
func StartRBACManager(ctx context.Context, spawn Spawner, core, kubeconfig, apiServer, dir string, args ...string) (Process, error) {
	ready := filepath.Join(dir, "rbac-manager-netns-ready")
	_ = os.Remove(ready)
	// The manager starts once the relay listens: it gives up at once when
	// the API server refuses its first request.
	script := `ip link set lo up && while [ ! -e "$0" ]; do sleep 0.1; done && exec "$@"`
	p, err := spawn("rbac-manager", "unshare", append([]string{"--net", "sh", "-c", script, ready, core, "rbac", "start"}, args...),
		[]string{"KUBECONFIG=" + kubeconfig, "POD_NAMESPACE=" + Namespace})
	if err != nil {
		return nil, err
	}
	ns := fmt.Sprintf("/proc/%d/ns/net", p.PID())
	var l net.Listener
	err = poll(ctx, netnsTimeout, func() error {
		if exited(p) {
			return errors.New(errRBACExited)
		}
		own, _ := os.Readlink("/proc/self/ns/net")
		if theirs, _ := os.Readlink(ns); theirs == "" || theirs == own {
			return errors.New(errRBACNetNS)
		}
		// Until lo is up, 127.0.0.1 is no address there.
		return testenv.InNetNS(ns, func() error {
			var err error
			l, err = net.Listen("tcp", apiServer)
			return err
		})
	})
	if err != nil {
		p.Stop()
		return nil, errors.Wrap(err, errRBACRelay)
	}
	go relay(ctx, l, apiServer)
	if err := os.WriteFile(ready, nil, 0o600); err != nil {
		p.Stop()
		return nil, errors.Wrap(err, errRBACRelay)
	}
	return p, nil
}

// relay accepts connections on l and copies each, both ways, to a new
// connection to addr, until ctx is done.
func relay(ctx context.Context, l net.Listener, addr string) {
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close() //nolint:errcheck // Closing ends the copy.
			out, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return
			}
			defer out.Close() //nolint:errcheck // Closing ends the copy.
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
			go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
			select {
			case <-done:
			case <-ctx.Done():
			}
		}()
	}
}

// A Build is one run of hack/xpkg.sh: what make xpkg REGISTRY=Repo
// VERSION=Version runs.
type Build struct {
	// CLI is the Crossplane CLI.
	CLI string
	// Repo is registry/org, where the packages are pushed; CAFile the PEM
	// CA the push trusts.
	Repo, CAFile string
	// Version is the packages' semver tag.
	Version string
	// Out is the output folder; the binaries it packaged are in BinDir.
	Out string
	// Overlay, when set, is laid over the package roots (XPKG_OVERLAY).
	Overlay string
	// Parts are the packages to build, all four when empty.
	Parts []string
}

// Run builds and pushes the packages.
func (b Build) Run(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, filepath.Join(testenv.RepoRoot(), "hack", "xpkg.sh"), b.Parts...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "REGISTRY="+b.Repo, "VERSION="+b.Version, "REGISTRY_CA="+b.CAFile,
		"OUTPUT_DIR="+b.Out, "CROSSPLANE="+b.CLI, "XPKG_OVERLAY="+b.Overlay)
	cmd.Env = append(cmd.Env, HarnessEnv()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return errors.Errorf(errFmtBuild, strings.Join(b.Parts, " "), err, out)
	}
	return nil
}

// BinDir is where the build put the binaries it packaged.
func (b Build) BinDir() string { return filepath.Join(b.Out, "bin", "linux_"+runtime.GOARCH) }

// HarnessEnv is the environment of a test's run of hack/xpkg.sh: only this
// host's architecture, whose nodes run the packages (a release's arm64
// cross-compile costs minutes of CPU on a cold Go build cache), and no
// -trimpath, so that its compile and go test's of the same packages
// (CGO_ENABLED=0 in make test) are one in Go's build cache. make
// xpkg-binaries builds the same, before the tests.
func HarnessEnv() []string { return []string{"ARCHES=" + runtime.GOARCH, "XPKG_TRIMPATH=0"} }

// freePort returns a port that is free on 127.0.0.1 now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, errors.Wrap(err, errNoFreePort)
	}
	defer l.Close() //nolint:errcheck // Only its port was needed.
	return l.Addr().(*net.TCPAddr).Port, nil
}

// UpgradePrinterColumn is the real change WriteUpgradeOverlay makes: a
// printer column on KubernetesProxy.
const UpgradePrinterColumn = "TARGET-NAMESPACE"

// WriteUpgradeOverlay writes into dir an overlay (Build.Overlay) that makes
// a next version of the packages with one real change and no change to the
// tree's API: the KubernetesProxy CRD gains printer column
// UpgradePrinterColumn.
func WriteUpgradeOverlay(dir string) error {
	const crd = "kubernetes.m.egressproxy.io_kubernetesproxies.yaml"
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "package", "provider", "crds", crd)) //nolint:gosec // A file of this repository.
	if err != nil {
		return err
	}
	u := map[string]any{}
	if err := yaml.Unmarshal(b, &u); err != nil {
		return err
	}
	versions, _, _ := unstructured.NestedSlice(u, "spec", "versions")
	for i := range versions {
		v, ok := versions[i].(map[string]any)
		if !ok {
			continue
		}
		cols, _ := v["additionalPrinterColumns"].([]any)
		v["additionalPrinterColumns"] = append(cols, map[string]any{
			"name": UpgradePrinterColumn, "type": "string", "jsonPath": ".spec.forProvider.namespace", "priority": int64(1)})
	}
	if err := unstructured.SetNestedSlice(u, versions, "spec", "versions"); err != nil {
		return err
	}
	if b, err = yaml.Marshal(u); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "provider", "crds"), 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "provider", "crds", crd), b, 0o600)
}
