/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/node"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/ociregistry"
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

	errRegistry           = "cannot start the package registry"
	errOverlay            = "cannot write the Configurations' overlay"
	errBuildPackages      = "cannot build and push the packages"
	errFmtInstalled       = "the packages were not installed: %s"
	errFmtNoRevision      = "no active, healthy %s of %s"
	errApplyPackages      = "cannot apply the Configurations"
	errFmtNotRunning      = "%s %s does not run yet: %s"
	errFmtRegistryHost    = "the registry is exposed at %s, not %s"
	errFmtNoConfiguration = "no Configuration %s"
	runtimeTimeout        = 3 * time.Minute
	installTimeout        = 3 * time.Minute
	revisionWaitPeriod    = 2 * time.Minute
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

// startRegistry starts the OCI registry the images and packages are pushed
// to, on the host's loopback, behind TLS with a CA of its own. The node and
// its pods reach it at node.BridgeIP on the same port (exposeRegistry),
// the address its certificate also names: Crossplane pulls the packages
// and containerd their images by that name, trusting the CA as a user
// trusts a private registry (the chart's registryCaBundleConfig, the
// node's certs.d). The harness pushes through loopback (Build.Via).
func (c *Cluster) startRegistry() error {
	reg, err := ociregistry.New(ociregistry.Options{Dir: c.dir("registry"), BlobsOnDisk: true, IPs: []net.IP{net.ParseIP(node.BridgeIP)}})
	if err != nil {
		return errors.Wrap(err, errRegistry)
	}
	c.registry = reg
	c.cleanups = append(c.cleanups, reg.Close)
	_, port, _ := net.SplitHostPort(reg.Host)
	c.RegistryHost = net.JoinHostPort(node.BridgeIP, port)
	c.PackageRepo = c.RegistryHost + "/" + packageOrg
	return nil
}

// exposeRegistry makes the registry reachable at RegistryHost inside the
// node's network namespace.
func (c *Cluster) exposeRegistry() error {
	got, err := c.Node.Expose(c.registry.Host)
	if err != nil {
		return errors.Wrap(err, errRegistry)
	}
	if got != c.RegistryHost {
		return errors.Errorf(errFmtRegistryHost, got, c.RegistryHost)
	}
	return nil
}

// build returns a build of the packages at PackageVersion into the
// state folder.
// The node runs the amd64 images: the harness builds only those (make xpkg
// builds every architecture).
func (c *Cluster) build(overlay string, parts ...string) Build {
	return Build{CLI: c.Tools.Crossplane, Repo: c.PackageRepo, CAFile: c.registry.CAFile, Via: c.registry.Host,
		Version: PackageVersion, Out: c.dir("xpkg"), Overlay: overlay, Parts: parts}
}

// push runs a build and records the digests it pushed.
func (c *Cluster) push(ctx context.Context, b Build) error {
	d, err := b.Run(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.PackageDigests == nil {
		c.PackageDigests = map[string]string{}
	}
	for ref, digest := range d {
		c.PackageDigests[ref] = digest
	}
	return nil
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
	return errors.Wrap(c.push(ctx, c.build(overlay, parts...)), errBuildPackages)
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
	if err := c.applyRuntimeConfigs(ctx); err != nil {
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
	for _, gvk := range []schema.GroupVersionKind{ProviderRevision, FunctionRevision} {
		name := ProviderName
		if gvk == FunctionRevision {
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
	if err := c.Client.List(ctx, revs, client.MatchingLabels{LabelPackage: pkg}); err != nil {
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

// runPackages waits until Crossplane's Deployment runtime runs the
// provider and the function of PackageVersion.
func (c *Cluster) runPackages(ctx context.Context) error {
	return c.runVersion(ctx, PackageVersion)
}

// runVersion waits until the active ProviderRevision and FunctionRevision
// at version are RevisionHealthy and RuntimeHealthy:
// Crossplane's Deployment runtime runs their package images as pods, with
// the DeploymentRuntimeConfigs applyRuntimeConfigs gave them, and those
// pods are ready.
func (c *Cluster) runVersion(ctx context.Context, version string) error {
	var prev, frev *unstructured.Unstructured
	var last error
	said := time.Now()
	if err := c.waitFor(ctx, nil, runtimeTimeout, "", func(ctx context.Context) (bool, error) {
		var err error
		defer func() {
			// The last error that says why, not the deadline's.
			if err != nil && ctx.Err() == nil {
				last = err
				if time.Since(said) > 20*time.Second {
					c.logf("  waiting: %v", err)
					said = time.Now()
				}
			}
		}()
		if prev, err = c.runningRevision(ctx, ProviderRevision, ProviderName, version); err != nil {
			return false, nil
		}
		frev, err = c.runningRevision(ctx, FunctionRevision, FunctionName, version)
		return err == nil, nil
	}); err != nil {
		return errors.Errorf("%v\nprovider pods:\n%s\nfunction pods:\n%s", last,
			c.PodLogs(ctx, CrossplaneNamespace, "pkg.crossplane.io/provider="+ProviderName, 40),
			c.PodLogs(ctx, CrossplaneNamespace, LabelRevision+"="+c.FunctionRevisionName, 20))
	}
	c.ProviderRevisionName, c.FunctionRevisionName = prev.GetName(), frev.GetName()
	c.ProviderServiceAccount = CrossplaneNamespace + ":" + providerServiceAccount
	return nil
}

// runningRevision returns the package's active revision at version once it
// is healthy (RevisionHealthy, by activeRevision, and RuntimeHealthy) and a pod of it is
// running and ready.
func (c *Cluster) runningRevision(ctx context.Context, gvk schema.GroupVersionKind, pkg, version string) (*unstructured.Unstructured, error) {
	r, err := c.activeRevision(ctx, gvk, pkg, version)
	if err != nil {
		return nil, err
	}
	if !HasCondition(r, "RuntimeHealthy", "True") {
		return nil, errors.Errorf(errFmtNotRunning, gvk.Kind, r.GetName(), conditions(r))
	}
	pods, err := c.revisionPods(ctx, r.GetName())
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if p.DeletionTimestamp == nil && podReady(&p) {
			return r, nil
		}
	}
	return nil, errors.Errorf(errFmtNotRunning, gvk.Kind, r.GetName(), "no ready pod")
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
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
	if err := c.push(ctx, c.buildOf(version, dir)); err != nil {
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
func (c *Cluster) buildOf(version, overlay string) Build {
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

// SetConfigurationVersion builds and pushes the Configuration name at
// version with overlay laid over the tree (and this machine's Composition
// inputs) unless version is already pushed, and points the Configuration at
// it, as a platform team moves one Configuration. Unlike Upgrade it waits
// for nothing: the version may be one Crossplane refuses.
func (c *Cluster) SetConfigurationVersion(ctx context.Context, name, version, overlay string) error {
	part := ""
	for _, cfg := range Configurations {
		if cfg.Name == name {
			part = cfg.Part
		}
	}
	if part == "" {
		return errors.Errorf(errFmtNoConfiguration, name)
	}
	c.mu.Lock()
	_, pushed := c.PackageDigests[c.PackageRepo+"/"+name+":"+version]
	c.mu.Unlock()
	if !pushed {
		dir := c.dir("xpkg-overlay-" + version)
		if overlay != "" {
			if err := os.CopyFS(dir, os.DirFS(overlay)); err != nil {
				return errors.Wrap(err, errOverlay)
			}
		}
		if err := c.writeOverlay(dir); err != nil {
			return errors.Wrap(err, errOverlay)
		}
		b := c.buildOf(version, dir)
		b.Parts = []string{part}
		if err := c.push(ctx, b); err != nil {
			return errors.Wrap(err, errBuildPackages)
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvkConfiguration)
	if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
		return errors.Wrap(err, errApplyPackages)
	}
	p := client.MergeFrom(u.DeepCopy())
	_ = unstructured.SetNestedField(u.Object, c.PackageRepo+"/"+name+":"+version, "spec", "package")
	return errors.Wrap(c.Client.Patch(ctx, u, p), errApplyPackages)
}
