/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/ociregistry"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/pkgruntime"
)

// The packages as Crossplane's package manager names them: a package it
// installs as a dependency is named after its repository path without the
// registry host (xpkg.ToDNSLabel), so these names do not depend on the
// registry's host:port.
const (
	// FunctionName is the functionRef of every Composition.
	FunctionName = "egressproxy-function-egressproxy"
	// ProviderName is the Provider the Configurations depend on.
	ProviderName = "egressproxy-provider-egressproxy"
	// PackageVersion is the version Start builds, pushes and installs.
	PackageVersion = "v0.1.0"

	// packageOrg is the repository path the packages are pushed under.
	packageOrg = "egressproxy"

	errRegistry        = "cannot start the package registry"
	errOverlay         = "cannot write the Configurations' overlay"
	errBuildPackages   = "cannot build and push the packages"
	errFmtInstalled    = "the packages were not installed: %s"
	errFmtNoRevision   = "no active, healthy %s of %s"
	errApplyPackages   = "cannot apply the Configurations"
	errRuntime         = "cannot start the package runtime"
	errRBACManager     = "cannot start Crossplane's RBAC manager"
	errRunProvider     = "cannot run the installed provider"
	errRunFunction     = "cannot run the installed function"
	installTimeout     = 3 * time.Minute
	revisionWaitPeriod = 2 * time.Minute
)

// Configurations are the Configuration packages Start installs, by package
// name and package root (package/<part>): the claim API and the
// namespaced XR API, both depending on the same Provider and Function.
var Configurations = []struct{ Name, Part string }{
	{Name: "configuration-egressproxy", Part: "configuration"},
	{Name: "configuration-egressproxy-namespaced", Part: "configuration-namespaced"},
}

// Crossplane's package kinds.
var (
	gvkConfiguration         = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Configuration"}
	gvkConfigurationRevision = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "ConfigurationRevision"}
	gvkProvider              = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Provider"}
	gvkFunction              = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Function"}
	gvkXRD                   = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "CompositeResourceDefinition"}
)

// startRegistry starts the OCI registry the packages are pushed to, on
// loopback, behind TLS with a CA of its own that core trusts.
func (c *Cluster) startRegistry() error {
	reg, err := ociregistry.New(ociregistry.Options{Dir: c.dir("registry"), BlobsOnDisk: true})
	if err != nil {
		return errors.Wrap(err, errRegistry)
	}
	c.registry = reg
	c.cleanups = append(c.cleanups, reg.Close)
	c.PackageRepo = reg.Host + "/" + packageOrg
	return nil
}

// build returns a build of the packages at PackageVersion into the
// state folder.
func (c *Cluster) build(overlay string, parts ...string) pkgruntime.Build {
	return pkgruntime.Build{CLI: c.Tools.Crossplane, Repo: c.PackageRepo, CAFile: c.registry.CAFile,
		Version: PackageVersion, Out: c.dir("xpkg"), Overlay: overlay, Parts: parts}
}

// buildConfigurations builds and pushes the Configurations once the
// Provider and the Function are (Start builds those while the control
// plane starts), with the Compositions' inputs this machine needs laid over
// them (writeOverlay).
func (c *Cluster) buildConfigurations(ctx context.Context) error {
	overlay := c.dir("xpkg-overlay")
	if err := c.writeOverlay(overlay); err != nil {
		return errors.Wrap(err, errOverlay)
	}
	parts := make([]string, 0, len(Configurations))
	for _, cfg := range Configurations {
		parts = append(parts, cfg.Part)
	}
	return errors.Wrap(c.build(overlay, parts...).Run(ctx), errBuildPackages)
}

// writeOverlay writes into dir/<part>/ the Composition files of the
// Configurations whose function input this machine needs changed (each
// test double's adaptInput), as a platform team builds its own
// Configuration. Everything else, guardrails included, stays as shipped.
func (c *Cluster) writeOverlay(dir string) error {
	files, err := ConfigurationFiles()
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f) //nolint:gosec // Files of this repository.
		if err != nil {
			return err
		}
		objs, err := Decode(filepath.Base(f), data)
		if err != nil {
			return err
		}
		changed := false
		for _, o := range objs {
			for _, b := range Backends() {
				d := doubles[b]
				if d.adaptInput == nil {
					continue
				}
				ok, err := adaptComposition(o, b, func(input map[string]any) error { return d.adaptInput(c, input) })
				if err != nil {
					return err
				}
				changed = changed || ok
			}
		}
		if !changed {
			continue
		}
		docs := make([]string, 0, len(objs))
		for _, o := range objs {
			b, err := yaml.Marshal(o.Object)
			if err != nil {
				return err
			}
			docs = append(docs, string(b))
		}
		out := filepath.Join(dir, filepath.Base(filepath.Dir(f)), filepath.Base(f))
		if err := os.MkdirAll(filepath.Dir(out), 0o750); err != nil {
			return err
		}
		if err := os.WriteFile(out, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// startRBACManager runs Crossplane's RBAC manager, which the Helm chart runs
// beside core, in a network namespace of its own
// (pkgruntime.StartRBACManager).
func (c *Cluster) startRBACManager(ctx context.Context) error {
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		return errors.Wrap(err, errRBACManager)
	}
	rctx, cancel := context.WithCancel(context.Background())
	c.cleanups = append(c.cleanups, cancel)
	var args []string
	if c.opts.Debug {
		args = append(args, "--debug")
	}
	_, err = pkgruntime.StartRBACManager(rctx, c.spawner(), c.Tools.CrossplaneCore, c.Kubeconfig, u.Host, c.dir("crossplane"), args...)
	return errors.Wrap(err, errRBACManager)
}

// spawner starts processes for package pkgruntime under the supervisor.
func (c *Cluster) spawner() pkgruntime.Spawner {
	return func(name, bin string, args, env []string) (pkgruntime.Process, error) {
		p, err := c.sup.start(name, bin, args, env)
		if err != nil {
			return nil, err
		}
		c.packageProcs[name] = p
		return p, nil
	}
}

// startRuntime starts the External package runtime's hooks (package
// pkgruntime): core runs --package-runtime=External and the harness is
// that runtime.
func (c *Cluster) startRuntime(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	c.stopRuntime = cancel
	r, err := pkgruntime.Start(ctx, pkgruntime.Options{
		Config: c.Config, Client: c.Client, Dir: c.dir("runtime"), LogDir: c.LogDir,
		Spawn: c.spawner(), Logf: c.logf,
	})
	c.runtime = r
	return errors.Wrap(err, errRuntime)
}

// installConfigurations applies what a platform team applies, and nothing
// else: the activation policy of a safe-start provider
// (examples/activation) and the Configurations, from the registry. The
// package manager installs the Provider and the Function they depend on;
// the provider's CRDs, the XRDs and the Compositions come from the
// packages. It waits until every package is installed and its revision's
// objects established, and each XRD serves its API.
func (c *Cluster) installConfigurations(ctx context.Context) error {
	if err := c.ApplyFile(ctx, filepath.Join(testenv.RepoRoot(), "examples", "activation", "egressproxy.yaml")); err != nil {
		return err
	}
	objs := make([]*unstructured.Unstructured, 0, len(Configurations))
	for _, cfg := range Configurations {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvkConfiguration)
		u.SetName(cfg.Name)
		_ = unstructured.SetNestedField(u.Object, c.PackageRepo+"/"+cfg.Name+":"+PackageVersion, "spec", "package")
		objs = append(objs, u)
	}
	if err := Apply(ctx, c.Client, objs...); err != nil {
		return errors.Wrap(err, errApplyPackages)
	}
	var waiting []string
	err := c.waitFor(ctx, nil, installTimeout, "", func(ctx context.Context) (bool, error) {
		waiting = c.notInstalled(ctx)
		return len(waiting) == 0, nil
	})
	if err != nil {
		return errors.Errorf(errFmtInstalled, strings.Join(waiting, "; "))
	}
	return nil
}

// notInstalled says what is not installed yet: a package not Installed,
// a revision whose objects are not established, an XRD not serving.
func (c *Cluster) notInstalled(ctx context.Context) []string {
	var waiting []string
	pkgs := []struct {
		gvk  schema.GroupVersionKind
		name string
	}{{gvkProvider, ProviderName}, {gvkFunction, FunctionName}}
	for _, cfg := range Configurations {
		pkgs = append(pkgs, struct {
			gvk  schema.GroupVersionKind
			name string
		}{gvkConfiguration, cfg.Name})
	}
	for _, p := range pkgs {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(p.gvk)
		if err := c.Client.Get(ctx, client.ObjectKey{Name: p.name}, u); err != nil {
			waiting = append(waiting, fmt.Sprintf("%s %s: %v", p.gvk.Kind, p.name, err))
			continue
		}
		if !HasCondition(u, "Installed", "True") || !HasCondition(u, "Healthy", "True") && p.gvk == gvkConfiguration {
			waiting = append(waiting, fmt.Sprintf("%s %s: %s", p.gvk.Kind, p.name, conditions(u)))
		}
	}
	for _, gvk := range []schema.GroupVersionKind{pkgruntime.ProviderRevision, pkgruntime.FunctionRevision} {
		name := ProviderName
		if gvk == pkgruntime.FunctionRevision {
			name = FunctionName
		}
		if _, err := c.activeRevision(ctx, gvk, name, PackageVersion); err != nil {
			waiting = append(waiting, err.Error())
		}
	}
	xrds := &unstructured.UnstructuredList{}
	xrds.SetGroupVersionKind(gvkXRD.GroupVersion().WithKind(gvkXRD.Kind + "List"))
	if err := c.Client.List(ctx, xrds); err != nil || len(xrds.Items) < len(Configurations) {
		return append(waiting, fmt.Sprintf("XRDs: %d of %d (%v)", len(xrds.Items), len(Configurations), err))
	}
	for i := range xrds.Items {
		x := &xrds.Items[i]
		_, claims, _ := unstructured.NestedMap(x.Object, "spec", "claimNames")
		if !HasCondition(x, "Established", "True") || (claims && !HasCondition(x, "Offered", "True")) {
			waiting = append(waiting, fmt.Sprintf("XRD %s: %s", x.GetName(), conditions(x)))
		}
	}
	return waiting
}

// activeRevision returns the package's active revision whose objects are
// established. Crossplane v2.4 says so with RevisionHealthy (the Healthy of
// a Provider or Function revision also needs RuntimeHealthy, which only the
// Deployment runtime reports); a ConfigurationRevision may say Healthy.
// With version set, only a revision of that version counts.
func (c *Cluster) activeRevision(ctx context.Context, gvk schema.GroupVersionKind, pkg, version string) (*unstructured.Unstructured, error) {
	revs := &unstructured.UnstructuredList{}
	revs.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.Client.List(ctx, revs, client.MatchingLabels{pkgruntime.LabelPackage: pkg}); err != nil {
		return nil, err
	}
	var seen []string
	for i := range revs.Items {
		r := &revs.Items[i]
		s, _, _ := unstructured.NestedString(r.Object, "spec", "desiredState")
		img, _, _ := unstructured.NestedString(r.Object, "spec", "image")
		healthy := HasCondition(r, "RevisionHealthy", "True") || (gvk == gvkConfigurationRevision && HasCondition(r, "Healthy", "True"))
		if s == "Active" && healthy && (version == "" || strings.HasSuffix(img, ":"+version)) {
			return r, nil
		}
		seen = append(seen, r.GetName()+" "+s+": "+conditions(r))
	}
	return nil, errors.Errorf(errFmtNoRevision+" (%s)", gvk.Kind, pkg, strings.Join(seen, "; "))
}

// runPackages runs the binaries of the active ProviderRevision and
// FunctionRevision at PackageVersion.
func (c *Cluster) runPackages(ctx context.Context) error {
	return c.runVersion(ctx, PackageVersion)
}

// runVersion runs the binaries of the active ProviderRevision and
// FunctionRevision at version, which hack/xpkg.sh packaged, as the
// Deployment runtime would run their images: the provider as its
// revision's ServiceAccount, bound to the ClusterRole Crossplane's RBAC
// manager makes for it and to those of examples/rbac (the platform team's
// part), with the flags a DeploymentRuntimeConfig would give it. A provider
// already running (of an older revision) is stopped once the new one's
// ServiceAccount is bound.
func (c *Cluster) runVersion(ctx context.Context, version string) error {
	var prev, frev *unstructured.Unstructured
	if err := c.waitFor(ctx, nil, revisionWaitPeriod, "", func(ctx context.Context) (bool, error) {
		var err error
		prev, err = c.activeRevision(ctx, pkgruntime.ProviderRevision, ProviderName, version)
		if err != nil {
			return false, nil
		}
		frev, err = c.activeRevision(ctx, pkgruntime.FunctionRevision, FunctionName, version)
		return err == nil, nil
	}); err != nil {
		return errors.Errorf(errFmtNoRevision, "ProviderRevision or FunctionRevision", ProviderName+", "+FunctionName+" at "+version)
	}
	if err := pkgruntime.ApplyExtraRoles(ctx, c.Client); err != nil {
		return err
	}
	// Both ServiceAccounts while the old process still runs.
	sas := []string{prev.GetName()}
	if old := c.runtime.ProviderRevision(); old != "" && old != prev.GetName() {
		sas = append(sas, old)
	}
	if err := pkgruntime.BindExtraRoles(ctx, c.Client, sas...); err != nil {
		return err
	}
	args := []string{
		// Poll often: gcp and kvm proxies are seen to become ready only at
		// a poll.
		"--poll=5s",
		"--timeout=30s",
		// KVM proxies boot the real guest image (setupKVM), and the
		// provider's default serve probe makes them Ready only once squid
		// in the guest serves.
	}
	var fnArgs []string
	if c.opts.Debug {
		args, fnArgs = append(args, "--debug"), []string{"--debug"}
	}
	bin := c.build("").BinDir()
	if version != PackageVersion {
		bin = c.buildOf(version, "").BinDir()
	}
	if err := c.runtime.RunProvider(ctx, prev, filepath.Join(bin, "provider"), append(args, c.opts.ProviderArgs...)...); err != nil {
		return errors.Wrap(err, errRunProvider)
	}
	if err := pkgruntime.BindExtraRoles(ctx, c.Client, prev.GetName()); err != nil {
		return err
	}
	metrics, _ := c.runtime.ProviderPorts()
	c.ProviderMetricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
	c.ProviderLog = "provider-" + prev.GetName() + ".log"
	c.ProviderServiceAccount = pkgruntime.Namespace + ":" + prev.GetName()
	c.ProviderProcess = c.packageProcs["provider-"+prev.GetName()]
	return errors.Wrap(c.runtime.RunFunction(ctx, frev, filepath.Join(bin, "function"), fnArgs...), errRunFunction)
}

// Upgrade builds and pushes the packages at version, the tree's with
// overlay (a folder laid over the package roots, see hack/xpkg.sh; may be
// empty) and this machine's Compositions (writeOverlay) laid over them,
// moves both Configurations to version and runs the Provider and Function
// revisions Crossplane rolls them to (core runs with
// --enable-dependency-version-upgrades, so the Configurations' dependsOn
// >=version moves them). It returns once the new provider and function
// run and every package revision of version is healthy.
func (c *Cluster) Upgrade(ctx context.Context, version, overlay string) error {
	dir := c.dir("xpkg-overlay-" + version)
	if overlay != "" {
		if err := os.CopyFS(dir, os.DirFS(overlay)); err != nil {
			return errors.Wrap(err, errOverlay)
		}
	}
	if err := c.writeOverlay(dir); err != nil {
		return errors.Wrap(err, errOverlay)
	}
	if err := c.buildOf(version, dir).Run(ctx); err != nil {
		return errors.Wrap(err, errBuildPackages)
	}
	for _, cfg := range Configurations {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvkConfiguration)
		if err := c.Client.Get(ctx, client.ObjectKey{Name: cfg.Name}, u); err != nil {
			return errors.Wrap(err, errApplyPackages)
		}
		p := client.MergeFrom(u.DeepCopy())
		_ = unstructured.SetNestedField(u.Object, c.PackageRepo+"/"+cfg.Name+":"+version, "spec", "package")
		if err := c.Client.Patch(ctx, u, p); err != nil {
			return errors.Wrap(err, errApplyPackages)
		}
	}
	if err := c.runVersion(ctx, version); err != nil {
		return err
	}
	var last error
	if err := c.waitFor(ctx, nil, installTimeout, "", func(ctx context.Context) (bool, error) {
		for _, cfg := range Configurations {
			if _, last = c.activeRevision(ctx, gvkConfigurationRevision, cfg.Name, version); last != nil {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return errors.Wrap(last, err.Error())
	}
	return nil
}

// buildOf is build for another version, into its own folder.
func (c *Cluster) buildOf(version, overlay string) pkgruntime.Build {
	b := c.build(overlay)
	b.Version, b.Out = version, c.dir("xpkg-"+version)
	return b
}

// conditions summarises an object's conditions for messages.
func conditions(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var b strings.Builder
	for _, c := range conds {
		m, _ := c.(map[string]any)
		fmt.Fprintf(&b, "[%v=%v %v: %v] ", m["type"], m["status"], m["reason"], m["message"])
	}
	return strings.TrimSpace(b.String())
}
