/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package pkgruntime

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
	errRBACLock     = "cannot lock the RBAC manager's port"
	errFmtRBACBusy  = "another RBAC manager held :8080 for %s (lock %s)"
	errNoFreePort   = "cannot find a free port on 127.0.0.1"

	// rbacLock serialises the RBAC managers of concurrent harnesses (the
	// e2e suite, test/install, make dev): each serves its metrics on :8080,
	// which it has no flag to change.
	rbacLock     = "egressproxy-rbac-manager.lock"
	rbacLockWait = 25 * time.Minute
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

// LockRBACManagerPort waits until no other harness on this machine runs an
// RBAC manager, for at most 25 minutes, and holds that until release is
// called or this process exits.
func LockRBACManagerPort(ctx context.Context, logf func(string, ...any)) (release func(), err error) {
	path := filepath.Join(os.TempDir(), rbacLock)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600) //nolint:gosec // A lock file of ours.
	if err != nil {
		return nil, errors.Wrap(err, errRBACLock)
	}
	start := time.Now()
	said := false
	for {
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			return func() { _ = f.Close() }, nil
		}
		if !said && logf != nil {
			logf("waiting for another harness's RBAC manager to stop (it holds :8080; lock %s)", path)
			said = true
		}
		if time.Since(start) > rbacLockWait {
			_ = f.Close()
			return nil, errors.Errorf(errFmtRBACBusy, rbacLockWait, path)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// RBACManagerArgs are the arguments of Crossplane's RBAC manager, which the
// Helm chart runs beside core: it makes each ProviderRevision's
// ClusterRoles and binds the system one to the ServiceAccount of the
// revision's Deployment. Hold LockRBACManagerPort while it runs.
func RBACManagerArgs() []string { return []string{"rbac", "start"} }

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
	if out, err := cmd.CombinedOutput(); err != nil {
		return errors.Errorf(errFmtBuild, strings.Join(b.Parts, " "), err, out)
	}
	return nil
}

// BinDir is where the build put the binaries it packaged.
func (b Build) BinDir() string { return filepath.Join(b.Out, "bin", "linux_amd64") }

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
