/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package install installs the project the way users install it: Crossplane
// core's package manager pulls the Configuration from an OCI registry and
// installs the Provider and the Function it depends on. The harness applies
// one Configuration and nothing else.
package install

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
	"github.com/egressproxy/provider-egressproxy/internal/gcpfake/proxyguest"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/ociregistry"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/pkgruntime"
)

const (
	version = "v0.1.0"

	// org is the repository path the packages are pushed under. Crossplane
	// names a package it installs as a dependency after its repository path
	// without the registry host (xpkg.ToDNSLabel(ref.Context().RepositoryStr())),
	// so these names do not depend on the registry's host:port.
	org           = "egressproxy"
	configuration = "configuration-egressproxy"
	providerName  = "egressproxy-provider-egressproxy"
	functionName  = "egressproxy-function-egressproxy"

	xrdName = "xegressproxies.egressproxy.io"

	// installTimeout bounds apply → everything installed: pulls of tens of
	// megabytes over loopback, and a few reconciles.
	installTimeout = 90 * time.Second
	buildTimeout   = 8 * time.Minute
)

func TestInstallConfiguration(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and pushes packages and runs Crossplane: skipped with -short")
	}
	core := testenv.Tool(t, "crossplane-core")
	cli := testenv.Tool(t, "crossplane")
	dir := t.TempDir()
	p := &plane{logDir: filepath.Join(dir, "logs")}
	if err := os.MkdirAll(p.logDir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			tail(t, filepath.Join(p.logDir, "crossplane.log"), 40)
			// INSTALL_LOGS=dir keeps the logs of a failed run: core, RBAC
			// manager, provider, function, and the audit log.
			if keep := os.Getenv("INSTALL_LOGS"); keep != "" {
				_ = os.CopyFS(keep, os.DirFS(p.logDir))
				if b, err := os.ReadFile(p.auditLog); err == nil {
					_ = os.WriteFile(filepath.Join(keep, "audit.log"), b, 0o600)
				}
			}
		}
	})
	ctx := t.Context()

	reg := ociregistry.Start(t, ociregistry.Options{Dir: filepath.Join(dir, "registry"), BlobsOnDisk: true})
	repo := reg.Host + "/" + org

	// Build and push while the control plane starts: the builds are the
	// slow part.
	began := time.Now()
	pushed := make(chan error, 1)
	go func() { pushed <- buildAndPush(ctx, cli, reg, repo, version, filepath.Join(dir, "out"), "") }()

	p.kube, p.cfg, p.kubeconfig = startControlPlane(t, dir)
	p.auditLog = filepath.Join(dir, "audit.log")
	startCrossplane(ctx, t, p, core, reg, dir)
	startRBACManager(ctx, t, p, core, dir)
	// The harness is the External runtime: it does what Crossplane's
	// runtime hooks would (runtime_test.go) and, from RunPackages on, runs
	// the packages' binaries as the Deployment runtime's pods would
	// (workload_test.go). Until then it reports no function endpoint.
	w := newWorkloads(ctx, t, p, dir)
	t.Logf("control plane and Crossplane core ready in %s", time.Since(began).Round(100*time.Millisecond))
	if err := <-pushed; err != nil {
		t.Fatalf("make xpkg REGISTRY=%s VERSION=%s: %v", repo, version, err)
	}
	t.Logf("packages built and pushed to %s in %s", repo, time.Since(began).Round(100*time.Millisecond))

	// The only objects the harness applies: the activation policy a
	// platform team applies for a safe-start provider
	// (examples/activation), and the Configuration.
	start := time.Now()
	mrap, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "activation", "egressproxy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	policy := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(mrap, &policy.Object); err != nil {
		t.Fatal(err)
	}
	if err := p.kube.Create(ctx, policy); err != nil {
		t.Fatalf("cannot apply the ManagedResourceActivationPolicy: %v", err)
	}
	cfg := &unstructured.Unstructured{}
	cfg.SetGroupVersionKind(gvConfiguration)
	cfg.SetName(configuration)
	_ = unstructured.SetNestedField(cfg.Object, repo+"/"+configuration+":"+version, "spec", "package")
	if err := p.kube.Create(ctx, cfg); err != nil {
		t.Fatalf("cannot apply the Configuration: %v", err)
	}
	waitInstalled(ctx, t, p.kube)
	t.Logf("INSTALL TIME: Configuration applied → Configuration, Provider and Function installed, every object established, the XRD offered in %s",
		time.Since(start).Round(100*time.Millisecond))

	t.Run("DependenciesInstalledByPackageManager", func(t *testing.T) {
		assertDependencies(ctx, t, p.kube, repo)
	})
	t.Run("ObjectsOwnedByRevisions", func(t *testing.T) {
		assertOwnership(ctx, t, p.kube)
	})
	t.Run("CompositionsReferenceInstalledFunction", func(t *testing.T) {
		assertFunctionRefs(ctx, t, p.kube)
	})
	t.Run("MissingTag", func(t *testing.T) {
		assertMissingTag(ctx, t, p.kube, repo)
	})
	t.Run("ClaimFindsInstalledFunction", func(t *testing.T) {
		assertClaimFindsFunction(ctx, t, p.kube)
	})

	// From here on the packages run. v0.2.0 and the broken v0.3.0 build
	// meanwhile.
	upgrades := make(chan error, 1)
	go func() { upgrades <- buildUpgrades(ctx, cli, reg, repo, dir) }()
	fake := gcpfake.NewTestServer(t, gcpfake.WithProjects(gcpProject), gcpfake.WithRequireAuth())
	// No VM runs here: stand in for every guest's serving report.
	go proxyguest.Run(ctx, fake, proxyguest.DefaultEvery)
	if !t.Run("RunPackages", func(t *testing.T) {
		if err := pkgruntime.ApplyExtraRoles(ctx, p.kube); err != nil {
			t.Fatal(err)
		}
		runActive(ctx, t, w, dir, version, "")
	}) {
		return
	}
	if !t.Run("ProxiesFromInstalledPackages", func(t *testing.T) {
		start := time.Now()
		createProxies(ctx, t, p.kube, fake)
		eventually(t, 3*time.Minute, "a Ready gcp claim and a Synced kubernetes claim", func() (bool, string) {
			return proxiesHealthy(ctx, p.kube)
		})
		t.Logf("claims composed by the installed function and served by the installed provider in %s: %s",
			time.Since(start).Round(100*time.Millisecond), strings.Join(world(ctx, t, p.kube, fake), "; "))
	}) {
		return
	}
	t.Run("ProviderIdentity", func(t *testing.T) {
		assertProviderIdentity(ctx, t, w, w.ProviderRevision())
	})
	if !t.Run("MissingPermission", func(t *testing.T) {
		assertMissingPermission(ctx, t, w)
	}) {
		return
	}
	if err := <-upgrades; err != nil {
		t.Fatalf("cannot build and push the upgrades: %v", err)
	}
	if !t.Run("Upgrade", func(t *testing.T) {
		assertUpgrade(ctx, t, w, fake, dir)
	}) {
		return
	}
	t.Run("BrokenVersion", func(t *testing.T) {
		assertBrokenVersion(ctx, t, w, fake)
	})
}

// buildAndPush runs what make xpkg REGISTRY=repo VERSION=version runs, with
// the package overlay XPKG_OVERLAY=overlay unless empty, for the parts given
// (default all four).
func buildAndPush(ctx context.Context, cli string, reg *ociregistry.Registry, repo, version, out, overlay string, parts ...string) error {
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	b := pkgruntime.Build{CLI: cli, Repo: repo, CAFile: reg.CAFile, Version: version, Out: out, Overlay: overlay, Parts: parts}
	return b.Run(ctx)
}

// waitInstalled waits until the Configuration and the two packages the
// package manager installs for it are installed: Installed=True on each, the
// XRD Established and Offered, and the revisions of the Provider and the Function
// RevisionHealthy (every object of the package established); the
// Configuration's revision Healthy. Their Healthy
// also needs RuntimeHealthy, which only the Deployment runtime reports: with
// External it stays Unknown.
func waitInstalled(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	pkgs := []struct {
		gvk, rev schema.GroupVersionKind
		name     string
	}{
		{gvConfiguration, gvConfigurationRevision, configuration},
		{gvProvider, gvProviderRevision, providerName},
		{gvFunction, gvFunctionRevision, functionName},
	}
	eventually(t, installTimeout, "the packages to be installed", func() (bool, string) {
		var waiting []string
		for _, p := range pkgs {
			u, err := get(ctx, c, p.gvk, "", p.name)
			if err != nil {
				waiting = append(waiting, fmt.Sprintf("%s %s: %v", p.gvk.Kind, p.name, err))
				continue
			}
			installed, _ := condition(u, "Installed")
			revs, _ := list(ctx, c, p.rev, client.MatchingLabels{labelPackage: p.name})
			if installed != "True" || len(revs) != 1 || !revisionHealthy(&revs[0]) {
				w := fmt.Sprintf("%s %s: %s", p.gvk.Kind, p.name, conditions(u))
				if len(revs) == 1 {
					w += fmt.Sprintf(" %s %s: %s", p.rev.Kind, revs[0].GetName(), conditions(&revs[0]))
				}
				waiting = append(waiting, w)
			}
		}
		// The XRD serves the claim API once Established and Offered.
		xrd, err := get(ctx, c, gvXRD, "", xrdName)
		if err != nil {
			waiting = append(waiting, "XRD "+xrdName+": "+err.Error())
		} else if e, _ := condition(xrd, "Established"); e != "True" {
			waiting = append(waiting, "XRD "+xrdName+": "+conditions(xrd))
		} else if o, _ := condition(xrd, "Offered"); o != "True" {
			waiting = append(waiting, "XRD "+xrdName+": "+conditions(xrd))
		}
		return len(waiting) == 0, strings.Join(waiting, "; ")
	})
}

// revisionHealthy reports whether every object of a revision's package is
// established: RevisionHealthy on a revision with a runtime, Healthy on a
// ConfigurationRevision.
func revisionHealthy(rev *unstructured.Unstructured) bool {
	s, _ := condition(rev, "RevisionHealthy")
	if s == "" {
		s, _ = condition(rev, "Healthy")
	}
	return s == "True"
}

// assertDependencies checks that the Provider and the Function exist with
// the names the package manager gives dependencies, point at the registry,
// and have exactly one active, healthy revision each.
func assertDependencies(ctx context.Context, t *testing.T, c client.Client, repo string) {
	cases := map[string]struct {
		pkg, rev    schema.GroupVersionKind
		name, image string
	}{
		"Provider": {pkg: gvProvider, rev: gvProviderRevision, name: providerName, image: repo + "/provider-egressproxy:" + version},
		"Function": {pkg: gvFunction, rev: gvFunctionRevision, name: functionName, image: repo + "/function-egressproxy:" + version},
		"Configuration": {pkg: gvConfiguration, rev: gvConfigurationRevision, name: configuration,
			image: repo + "/" + configuration + ":" + version},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			u, err := get(ctx, c, tc.pkg, "", tc.name)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.pkg.Kind, tc.name, err)
			}
			// The resolver picked the only semver tag satisfying >=v0.1.0.
			if got, _, _ := unstructured.NestedString(u.Object, "spec", "package"); got != tc.image {
				t.Errorf("%s %s spec.package: want %s, got %s", tc.pkg.Kind, tc.name, tc.image, got)
			}
			revs, err := list(ctx, c, tc.rev, client.MatchingLabels{labelPackage: tc.name})
			if err != nil || len(revs) != 1 {
				t.Fatalf("%s of %s: want 1, got %d (%v)", tc.rev.Kind, tc.name, len(revs), err)
			}
			r := revs[0]
			if s, _, _ := unstructured.NestedString(r.Object, "spec", "desiredState"); s != "Active" {
				t.Errorf("%s %s desiredState: want Active, got %s", tc.rev.Kind, r.GetName(), s)
			}
			if !revisionHealthy(&r) {
				t.Errorf("%s %s: want RevisionHealthy (or Healthy) True, got %s", tc.rev.Kind, r.GetName(), conditions(&r))
			}
			t.Logf("%s %s → %s %s: %s", tc.pkg.Kind, tc.name, tc.rev.Kind, r.GetName(), conditions(&r))
		})
	}
}

// assertOwnership checks that every object of the packages is in the cluster
// and controlled by the revision of the package it came from: the provider's
// CRDs (through the ManagedResourceDefinitions Crossplane v2 makes of the
// managed resource CRDs), the XRD and the Compositions; and that the
// function's input CRD is not installed at all.
func assertOwnership(ctx context.Context, t *testing.T, c client.Client) {
	prev := activeRevision(ctx, t, c, gvProviderRevision, providerName)
	frev := activeRevision(ctx, t, c, gvFunctionRevision, functionName)
	crev := activeRevision(ctx, t, c, gvConfigurationRevision, configuration)
	t.Logf("active revisions: %s, %s, %s", prev, frev, crev)

	t.Run("ProviderCRDs", func(t *testing.T) {
		crds := objectKinds(t, filepath.Join("package", "provider", "crds"), "CustomResourceDefinition")
		if len(crds) == 0 {
			t.Fatal("package/provider/crds holds no CRD")
		}
		mrds := 0
		for n, kind := range crds {
			crd, err := get(ctx, c, gvCRD, "", n)
			if err != nil {
				t.Errorf("CRD %s: %v", n, err)
				continue
			}
			if s, msg := condition(crd, "Established"); s != "True" {
				t.Errorf("CRD %s: want Established=True, got %s (%s)", n, s, msg)
			}
			if k, owner := controller(crd); k != gvProviderRevision.Kind || owner != prev {
				t.Errorf("CRD %s: want controlled by ProviderRevision %s, got %s %s", n, prev, k, owner)
			}
			// Crossplane v2 installs a managed resource CRD through a
			// ManagedResourceDefinition of the same name, controlled by the
			// revision (its MRD controller then applies the CRD); provider
			// config kinds stay plain CRDs.
			mrd, err := get(ctx, c, gvMRD, "", n)
			if strings.Contains(kind, "ProviderConfig") {
				if err == nil {
					t.Errorf("CRD %s of kind %s: want no MRD, got one", n, kind)
				}
				continue
			}
			if err != nil {
				t.Errorf("MRD %s of managed resource kind %s: %v", n, kind, err)
				continue
			}
			mrds++
			// The provider declares safe-start: Crossplane makes its MRDs
			// inactive, and the policy of examples/activation activates
			// them all.
			if s, _, _ := unstructured.NestedString(mrd.Object, "spec", "state"); s != "Active" {
				t.Errorf("MRD %s: want spec.state Active, got %q", n, s)
			}
			if k, owner := controller(mrd); k != gvProviderRevision.Kind || owner != prev {
				t.Errorf("MRD %s: want controlled by ProviderRevision %s, got %s %s", n, prev, k, owner)
			}
		}
		t.Logf("%d provider CRDs, %d of them managed resources installed through an Active MRD", len(crds), mrds)
	})
	t.Run("FunctionInputCRD", func(t *testing.T) {
		// Crossplane installs no object of a Function package: the input
		// CRD is there for offline validation (crossplane beta validate).
		for _, n := range objectNames(t, filepath.Join("package", "function", "input"), "CustomResourceDefinition") {
			if _, err := get(ctx, c, gvCRD, "", n); !kerrors.IsNotFound(err) {
				t.Errorf("CRD %s of the Function package: want not installed, got %v", n, err)
			}
		}
	})
	t.Run("XRDAndCompositions", func(t *testing.T) {
		want := map[string]schema.GroupVersionKind{xrdName: gvXRD}
		for _, n := range objectNames(t, filepath.Join("package", "configuration"), "Composition") {
			want[n] = gvComposition
		}
		for n, gvk := range want {
			u, err := get(ctx, c, gvk, "", n)
			if err != nil {
				t.Errorf("%s %s: %v", gvk.Kind, n, err)
				continue
			}
			if kind, owner := controller(u); kind != gvConfigurationRevision.Kind || owner != crev {
				t.Errorf("%s %s: want controlled by ConfigurationRevision %s, got %s %s", gvk.Kind, n, crev, kind, owner)
			}
		}
	})
}

// assertFunctionRefs checks that every Composition the Configuration
// installed references the Function by the name the package manager gave
// it: otherwise no claim composes.
func assertFunctionRefs(ctx context.Context, t *testing.T, c client.Client) {
	comps, err := list(ctx, c, gvComposition)
	if err != nil || len(comps) == 0 {
		t.Fatalf("Compositions: %d (%v)", len(comps), err)
	}
	for _, comp := range comps {
		steps, _, _ := unstructured.NestedSlice(comp.Object, "spec", "pipeline")
		for _, s := range steps {
			ref, _, _ := unstructured.NestedString(s.(map[string]any), "functionRef", "name")
			if ref != functionName {
				t.Errorf("Composition %s: functionRef.name is %q, but the package manager installed the Function as %q "+
					"(xpkg.ToDNSLabel of its repository path %s/function-egressproxy): the Composition cannot compose",
					comp.GetName(), ref, functionName, org)
			}
		}
	}
}

// assertMissingTag applies a second Configuration that names a tag the
// registry does not have: Crossplane must say so on it, and nothing already
// installed may change.
func assertMissingTag(ctx context.Context, t *testing.T, c client.Client, repo string) {
	before := snapshot(ctx, t, c)
	bad := &unstructured.Unstructured{}
	bad.SetGroupVersionKind(gvConfiguration)
	bad.SetName(configuration + "-missing")
	_ = unstructured.SetNestedField(bad.Object, repo+"/"+configuration+":v9.9.9", "spec", "package")
	if err := c.Create(ctx, bad); err != nil {
		t.Fatalf("cannot apply the Configuration: %v", err)
	}
	var seen string
	eventually(t, 60*time.Second, "a False condition on the Configuration with a missing tag", func() (bool, string) {
		u, err := get(ctx, c, gvConfiguration, "", bad.GetName())
		if err != nil {
			return false, err.Error()
		}
		for _, typ := range []string{"Installed", "Healthy"} {
			if s, msg := condition(u, typ); s == "False" && strings.Contains(msg, "v9.9.9") {
				seen = typ + "=False " + msg
				return true, ""
			}
		}
		return false, conditions(u)
	})
	t.Logf("Configuration %s: %s", bad.GetName(), seen)
	// Crossplane gives up on the bad package, with a backoff: give it a few
	// reconciles to touch what it must not.
	time.Sleep(5 * time.Second)
	if diff := cmp.Diff(before, snapshot(ctx, t, c)); diff != "" {
		t.Errorf("a Configuration with a missing tag changed installed objects: -before, +after:\n%s", diff)
	}
	if revs, _ := list(ctx, c, gvConfigurationRevision, client.MatchingLabels{labelPackage: bad.GetName()}); len(revs) != 0 {
		t.Errorf("a Configuration with a missing tag got %d revisions", len(revs))
	}
	_ = c.Delete(ctx, bad)
}

// assertClaimFindsFunction creates the example claim and checks that core
// finds the Function its Composition references among the FunctionRevisions
// the package manager installed. Nothing serves the function here, so the
// furthest a claim can get is core naming that active FunctionRevision and
// its missing endpoint; a functionRef naming no installed Function stops
// earlier, at the CompositionRevision's pipeline check or at "no active
// revisions".
func assertClaimFindsFunction(ctx context.Context, t *testing.T, c client.Client) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "composition", "claim-kubernetes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	claim := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &claim.Object); err != nil {
		t.Fatal(err)
	}
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(claim.GetNamespace())
	if err := c.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, claim); err != nil {
		t.Fatalf("cannot create the claim: %v", err)
	}
	xrGVK := schema.GroupVersionKind{Group: "egressproxy.io", Version: "v1alpha1", Kind: "XEgressProxy"}
	want := fmt.Sprintf("active FunctionRevision %q", activeRevision(ctx, t, c, gvFunctionRevision, functionName))
	var seen string
	eventually(t, 60*time.Second, "core to find the installed Function for the claim", func() (bool, string) {
		cur, err := get(ctx, c, claim.GroupVersionKind(), claim.GetNamespace(), claim.GetName())
		if err != nil {
			return false, err.Error()
		}
		xr, _, _ := unstructured.NestedString(cur.Object, "spec", "resourceRef", "name")
		if xr == "" {
			return false, "claim: " + conditions(cur)
		}
		u, err := get(ctx, c, xrGVK, "", xr)
		if err != nil {
			return false, err.Error()
		}
		_, msg := condition(u, "Synced")
		seen = msg
		// Core gives up on a functionRef that names no installed Function
		// with one of these: no need to wait any longer.
		if strings.Contains(msg, "cannot find an active FunctionRevision") || strings.Contains(msg, "valid function pipeline") {
			return true, ""
		}
		return strings.Contains(msg, want) && strings.Contains(msg, "empty status.endpoint"), "XR " + xr + ": " + conditions(u)
	})
	if !strings.Contains(seen, want) {
		t.Fatalf("core did not find the Function the package manager installed (%s): XR Synced: %s", functionName, seen)
	}
	t.Logf("XR Synced: %s", seen)
}

// snapshot identifies every installed package object and what it owns: a
// change of UID means deleted and recreated, of generation means rewritten;
// Healthy must stay True.
func snapshot(ctx context.Context, t *testing.T, c client.Client) []string {
	t.Helper()
	var out []string
	for _, gvk := range []schema.GroupVersionKind{gvConfiguration, gvProvider, gvFunction, gvConfigurationRevision,
		gvProviderRevision, gvFunctionRevision, gvMRD, gvCRD, gvXRD, gvComposition} {
		items, err := list(ctx, c, gvk)
		if err != nil {
			t.Fatalf("cannot list %s: %v", gvk.Kind, err)
		}
		for _, u := range items {
			if strings.HasSuffix(u.GetName(), "-missing") || strings.HasSuffix(u.GetName(), ".crossplane.io") {
				continue
			}
			h, _ := condition(&u, "Healthy")
			out = append(out, fmt.Sprintf("%s/%s uid=%s gen=%d healthy=%s", gvk.Kind, u.GetName(), u.GetUID(), u.GetGeneration(), h))
		}
	}
	sort.Strings(out)
	return out
}

// activeRevision returns the name of the package's only active revision.
func activeRevision(ctx context.Context, t *testing.T, c client.Client, gvk schema.GroupVersionKind, pkg string) string {
	t.Helper()
	revs, err := list(ctx, c, gvk, client.MatchingLabels{labelPackage: pkg})
	if err != nil {
		t.Fatalf("cannot list %s: %v", gvk.Kind, err)
	}
	for _, r := range revs {
		if s, _, _ := unstructured.NestedString(r.Object, "spec", "desiredState"); s == "Active" {
			return r.GetName()
		}
	}
	t.Fatalf("no active %s of %s", gvk.Kind, pkg)
	return ""
}

// objectNames returns the names of the objects of a kind in the YAML files
// of a folder of the repository.
func objectNames(t *testing.T, dir, kind string) []string {
	t.Helper()
	var names []string
	for n := range objectKinds(t, dir, kind) {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// objectKinds returns, for the objects of a kind in the YAML files of a
// folder of the repository, their names and, for CRDs, the kinds they define.
func objectKinds(t *testing.T, dir, kind string) map[string]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), dir, "*.yaml"))
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f) //nolint:gosec // A file of this repository.
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---") {
			var m struct {
				Kind     string            `json:"kind"`
				Metadata metav1.ObjectMeta `json:"metadata"`
				Spec     struct {
					Names struct {
						Kind string `json:"kind"`
					} `json:"names"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal([]byte(doc), &m); err == nil && m.Kind == kind {
				out[m.Metadata.Name] = m.Spec.Names.Kind
			}
		}
	}
	return out
}

// tail logs the last n lines of a file.
func tail(t *testing.T, file string, n int) {
	f, err := os.Open(file) //nolint:gosec // The test's own log.
	if err != nil {
		return
	}
	defer f.Close() //nolint:errcheck // Read only.
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		lines = append(lines, s.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	t.Logf("last lines of %s:\n%s", file, strings.Join(lines, "\n"))
}
