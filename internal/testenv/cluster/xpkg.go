/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

const errFmtXpkg = "hack/xpkg.sh %s failed: %v\n%s"

// LabelPackage is the label on a package's revisions naming the package.
const LabelPackage = "pkg.crossplane.io/package"

// LabelRevision is the label the Deployment runtime puts on a revision's
// pods, naming the revision.
const LabelRevision = "pkg.crossplane.io/revision"

// Crossplane's package revision kinds.
var (
	ProviderRevision = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "ProviderRevision"}
	FunctionRevision = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "FunctionRevision"}
)

// A Build is one run of hack/xpkg.sh: what make xpkg REGISTRY=Repo
// VERSION=Version runs.
type Build struct {
	// CLI is the Crossplane CLI.
	CLI string
	// Repo is registry/org, where the packages are pushed and pulled from;
	// CAFile the PEM CA the push trusts.
	Repo, CAFile string
	// Via is the host:port the push connects to, when Repo's host is an
	// address only the nodes reach (hack/xpkgpush -via).
	Via string
	// Version is the packages' semver tag.
	Version string
	// Out is the output folder; the binaries it packaged are in BinDir.
	Out string
	// Overlay, when set, is laid over the package roots (XPKG_OVERLAY).
	Overlay string
	// Parts are the packages to build, all four when empty.
	Parts []string
	// Arches are the architectures of the images, xpkg.sh's default when
	// empty.
	Arches []string
}

// Run builds and pushes the packages, and returns the digest pushed for
// each reference (xpkgpush prints REF@DIGEST).
func (b Build) Run(ctx context.Context) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(testenv.RepoRoot(), "hack", "xpkg.sh"), b.Parts...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "REGISTRY="+b.Repo, "VERSION="+b.Version, "REGISTRY_CA="+b.CAFile,
		"OUTPUT_DIR="+b.Out, "CROSSPLANE="+b.CLI, "XPKG_OVERLAY="+b.Overlay, "PUSH_VIA="+b.Via)
	cmd.Env = append(cmd.Env, HarnessEnv()...)
	if len(b.Arches) > 0 {
		cmd.Env = append(cmd.Env, "ARCHES="+strings.Join(b.Arches, " "))
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.Errorf(errFmtXpkg, strings.Join(b.Parts, " "), err, stderr.String()+string(out))
	}
	digests := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if i := strings.LastIndex(l, "@sha256:"); i > 0 {
			digests[l[:i]] = l[i+1:]
		}
	}
	return digests, nil
}

// BinDir is where the build put the binaries it packaged.
func (b Build) BinDir() string { return filepath.Join(b.Out, "bin", "linux_"+runtime.GOARCH) }

// HarnessEnv is the environment of a test's run of hack/xpkg.sh: only this
// host's architecture (the index of both is make xpkg's job and one test's),
// and untrimmed builds, so go test and the packages share one compile of
// the provider's dependencies (go test cannot use -trimpath: RepoRoot finds
// the repository from its source path).
func HarnessEnv() []string { return []string{"ARCHES=" + runtime.GOARCH, "XPKG_TRIMPATH=0"} }

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

// WhoAmI asks the API server who cfg authenticates as.
func WhoAmI(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	rv, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return rv.Status.UserInfo.Username, nil
}
