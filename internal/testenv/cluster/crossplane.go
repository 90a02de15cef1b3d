/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/pkgruntime"
)

// Crossplane's namespace and the Secrets core init fills.
const (
	// CrossplaneNamespace is where Crossplane keeps its Secrets.
	CrossplaneNamespace = "crossplane-system"

	secretCA     = "crossplane-root-ca"
	secretClient = "crossplane-tls-client"
)

const (
	errCoreVersion  = "cannot read the version of crossplane-core"
	errFmtCRDs      = "cannot find Crossplane %s's CRDs in the Go module cache (go mod download)"
	errFmtCoreInit  = "crossplane core init failed %d times; the last: %s"
	errGetSecret    = "cannot get a Secret core init creates"
	errWriteTLS     = "cannot write Crossplane's client certificate"
	errCoreReady    = "crossplane core did not become ready"
	errFmtNoTLSData = "Secret %s/%s has no %s"
	errFmtNamespace = "cannot create namespace %s"

	coreInitAttempts = 5
)

// crossplaneCRDs returns the folder of the CRDs of the Crossplane release the
// crossplane-core binary was built from, from the Go module cache (hack/tools.sh
// built it from there; go mod download fetches it again if the cache was
// cleaned).
func crossplaneCRDs(ctx context.Context, core string) (string, error) {
	out, err := exec.CommandContext(ctx, core, "--version").Output()
	if err != nil {
		return "", errors.Wrap(err, errCoreVersion)
	}
	v := strings.TrimSpace(string(out))
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "github.com/crossplane/crossplane/v2@"+v)
	// Outside any module, so the project's go.mod is not touched.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, err = cmd.Output()
	if err != nil {
		return "", errors.Wrapf(err, errFmtCRDs, v)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", errors.Errorf(errFmtCRDs, v)
	}
	return filepath.Join(m.Dir, "cluster", "crds"), nil
}

// coreEnv is the environment core init and core start read their settings
// from: their flag names come out oddly (--cr-ds-path, --tlsca-secret-name).
func (c *Cluster) coreEnv() []string {
	return []string{
		"KUBECONFIG=" + c.Kubeconfig,
		"POD_NAMESPACE=" + CrossplaneNamespace,
		"CRDS_PATH=" + c.crossplaneCRDs,
		"ENABLE_WEBHOOKS=false",
		"TLS_CA_SECRET_NAME=" + secretCA,
		"TLS_CLIENT_SECRET_NAME=" + secretClient,
		"TLS_CLIENT_CERTS_DIR=" + c.dir("tls", "crossplane-client"),
	}
}

// coreInit installs Crossplane's CRDs and creates its CA and client
// certificate. Its first run often fails with a stale REST mapper right
// after it installs the CRDs ("no matches for kind Lock"): run it again.
func (c *Cluster) coreInit(ctx context.Context) error {
	var last string
	for i := 1; i <= coreInitAttempts; i++ {
		cmd := exec.CommandContext(ctx, c.Tools.CrossplaneCore, "core", "init")
		cmd.Env = append(os.Environ(), c.coreEnv()...)
		out, err := cmd.CombinedOutput()
		_ = appendFile(filepath.Join(c.LogDir, "crossplane-init.log"), fmt.Sprintf("### attempt %d\n%s\n", i, out))
		if err == nil {
			return nil
		}
		last = lastLine(string(out))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(i) * 500 * time.Millisecond):
		}
	}
	return errors.Errorf(errFmtCoreInit, coreInitAttempts, last)
}

// writeClientTLS writes core's client certificate, which it needs to call
// functions, from the Secret core init filled.
func (c *Cluster) writeClientTLS(ctx context.Context) error {
	s := &corev1.Secret{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: CrossplaneNamespace, Name: secretClient}, s); err != nil {
		return errors.Wrap(err, errGetSecret)
	}
	dir := c.dir("tls", "crossplane-client")
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if len(s.Data[k]) == 0 {
			return errors.Errorf(errFmtNoTLSData, CrossplaneNamespace, secretClient, k)
		}
		if err := os.WriteFile(filepath.Join(dir, k), s.Data[k], 0o600); err != nil {
			return errors.Wrap(err, errWriteTLS)
		}
	}
	return nil
}

// startCore runs crossplane core start without webhooks, with the External
// package runtime (the harness runs the packages, package pkgruntime), on
// free ports, trusting the package registry's CA, in a private mount
// namespace whose /etc/hosts resolves the function's Service names to
// loopback (pkgruntime.WithPrivateHosts).
func (c *Cluster) startCore(ctx context.Context) error {
	metrics, err := freePort()
	if err != nil {
		return err
	}
	health, err := freePort()
	if err != nil {
		return err
	}
	args := []string{"core", "start", "--enable-webhooks=false", "--package-runtime=External",
		"--xpkg-cache-dir=" + c.dir("crossplane", "xpkg"),
		"--ca-bundle-path=" + c.registry.CAFile,
		// A Configuration upgrade rolls the Provider and the Function to
		// the versions its dependsOn asks for (alpha in v2.4).
		"--enable-dependency-version-upgrades",
		fmt.Sprintf("--metrics-port=%d", metrics), fmt.Sprintf("--health-probe-port=%d", health),
		"--poll-interval=15s",
	}
	if c.opts.Debug {
		args = append(args, "--debug")
	}
	bin, wrapped, err := pkgruntime.WithPrivateHosts(ctx, filepath.Join(c.dir("crossplane"), "hosts"), []string{FunctionName},
		c.Tools.CrossplaneCore, args...)
	if err != nil {
		return err
	}
	p, err := c.sup.start("crossplane", bin, wrapped, c.coreEnv())
	if err != nil {
		return err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", health)
	return c.waitFor(ctx, p, 60*time.Second, errCoreReady, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, url), nil
	})
}

// httpOK reports whether url answers 200.
func httpOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = rsp.Body.Close()
	return rsp.StatusCode == http.StatusOK
}

// ensureNamespace creates a namespace if it is missing.
func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	return errors.Wrapf(client.IgnoreAlreadyExists(c.Create(ctx, ns)), errFmtNamespace, name)
}
