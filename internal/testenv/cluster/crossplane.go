/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// CrossplaneNamespace is where Crossplane's chart installs it, and where
// it runs the packages.
const CrossplaneNamespace = "crossplane-system"

const (
	errCoreVersion    = "cannot read the version of crossplane-core"
	errFmtCRDs        = "cannot find Crossplane %s's CRDs in the Go module cache (go mod download)"
	errFmtNamespace   = "cannot create namespace %s"
	errSystemImages   = "cannot build Crossplane's image (hack/system-images.sh)"
	errNoCoreRef      = "hack/system-images.sh's refs name no crossplane image"
	errPushCore       = "cannot push Crossplane's image to the registry"
	errInstallXP      = "cannot install Crossplane from its chart"
	errFmtXPAvailable = "Crossplane's Deployments are not Available: %s"

	crossplaneTimeout = 3 * time.Minute
)

// crossplaneCRDs returns the folder of the CRDs of the Crossplane release the
// crossplane-core binary was built from, in the Go module cache (hack/tools.sh
// built it from there; go mod download fetches it again if the cache was
// cleaned). Its chart is beside it (crossplaneChartDir).
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

// startCrossplane installs Crossplane as a platform team does: its image
// (hack/system-images.sh, from the crossplane-core binary) pushed to the
// registry the node pulls from, then its own Helm chart with
// examples/crossplane/values.yaml, core trusting the registry's CA through
// the ConfigMap those values name. Core's init container installs the CRDs
// and webhook configurations; core and the RBAC manager run as pods. It
// returns once both Deployments are Available.
func (c *Cluster) startCrossplane(ctx context.Context) error {
	if c.Node == nil {
		return errors.New(errNoNode)
	}
	if c.crossplaneCRDs == "" {
		crds, err := crossplaneCRDs(ctx, c.Tools.CrossplaneCore)
		if err != nil {
			return err
		}
		c.crossplaneCRDs = crds
	}
	out, err := exec.CommandContext(ctx, filepath.Join(testenv.RepoRoot(), "hack", "system-images.sh"), "build").Output()
	if err != nil {
		return errors.Wrap(err, errSystemImages)
	}
	dir := strings.TrimSpace(string(out))
	refs, err := os.ReadFile(filepath.Join(dir, "refs")) //nolint:gosec // The script's own output.
	if err != nil {
		return errors.Wrap(err, errSystemImages)
	}
	tag := ""
	for _, l := range strings.Split(string(refs), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "crossplane" {
			if i := strings.LastIndex(f[1], ":"); i > 0 {
				tag = f[1][i+1:]
			}
		}
	}
	if tag == "" {
		return errors.New(errNoCoreRef)
	}
	// Pushed through the host's loopback; the node pulls the same
	// repository by the address it reaches the registry at.
	if _, err := pushImage(ctx, filepath.Join(dir, "crossplane.tar"), c.registry.Host+"/crossplane-system/crossplane:"+tag, c.registry.Transport()); err != nil {
		return errors.Wrap(err, errPushCore)
	}
	var args []string
	if c.opts.Debug {
		args = append(args, "--debug")
	}
	if err := installCrossplane(ctx, c.Client, crossplaneInstall{
		ChartDir: crossplaneChartDir(c.crossplaneCRDs), ValuesFile: CrossplaneValuesFile(),
		Repository: c.RegistryHost + "/crossplane-system/crossplane", Tag: tag,
		RegistryCA: c.registry.CAPEM, ExtraArgs: args,
	}); err != nil {
		return errors.Wrap(err, errInstallXP)
	}
	var why string
	if err := c.waitFor(ctx, nil, crossplaneTimeout, "", func(ctx context.Context) (bool, error) {
		ok, w, err := crossplaneAvailable(ctx, c.Client)
		why = w
		if err != nil {
			why = err.Error()
		}
		return ok, nil
	}); err != nil {
		return errors.Errorf(errFmtXPAvailable+"\n%s", why, c.PodLogs(ctx, CrossplaneNamespace, "app=crossplane", 30))
	}
	return nil
}

// ensureNamespace creates a namespace if it is missing.
func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	return errors.Wrapf(client.IgnoreAlreadyExists(c.Create(ctx, ns)), errFmtNamespace, name)
}
