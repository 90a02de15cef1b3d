/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

const (
	errFmtBuild = "cannot build %s: %s"
)

// Tools are the programs the local control plane runs, built by
// hack/tools.sh into its cache.
type Tools struct {
	// KubeControllerManager runs the garbage collector and the Deployment
	// and ReplicaSet controllers.
	KubeControllerManager string
	// KubeScheduler places pods on the nodes.
	KubeScheduler string
	// KubeProxy serves the Services' cluster IPs on the real node.
	KubeProxy string
	// CoreDNS is the cluster DNS; hack/coredns-image.sh puts it in an
	// image.
	CoreDNS string
	// Kwok fakes the kubelets of the nodes.
	Kwok string
	// CrossplaneCore is the Crossplane controller (crossplane core start).
	CrossplaneCore string
	// Crossplane is the CLI, for crossplane beta trace.
	Crossplane string
	// Kubectl is for people, and for make dev's hints.
	Kubectl string
}

// FindTools returns the tools that are built, and the hack/tools.sh names of
// the required ones that are not. The envtest binaries are found by
// internal/testenv/kube.
func FindTools() (Tools, []string) {
	var missing []string
	get := func(name string) string {
		p := cached(name)
		if p == "" {
			missing = append(missing, name)
		}
		return p
	}
	t := Tools{
		KubeControllerManager: get("kube-controller-manager"),
		KubeScheduler:         get("kube-scheduler"),
		KubeProxy:             get("kube-proxy"),
		CoreDNS:               get("coredns"),
		Kwok:                  get("kwok"),
		CrossplaneCore:        get("crossplane-core"),
		Crossplane:            get("crossplane"),
		Kubectl:               get("kubectl"),
	}
	return t, missing
}

// cached returns the path hack/tools.sh cached prints, or "".
func cached(name string) string {
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "tools.sh"), "cached", name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// Binaries are this repository's programs that Start runs itself; the
// provider and the function come from their packages.
type Binaries struct {
	// GCEFake is cmd/gcp-fake.
	GCEFake string
}

// BuildBinaries builds the GCE fake from this checkout into dir. Go's build
// cache makes a rebuild quick.
func BuildBinaries(ctx context.Context, dir string) (Binaries, error) {
	b := Binaries{GCEFake: filepath.Join(dir, "gcp-fake")}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", b.GCEFake, "./cmd/gcp-fake")
	// The default environment, so that go test and go build share Go's
	// build cache with this build.
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return b, errors.Errorf(errFmtBuild, "./cmd/gcp-fake", strings.TrimSpace(string(out))+": "+err.Error())
	}
	return b, nil
}
