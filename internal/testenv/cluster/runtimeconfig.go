/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// The ClusterRoles this project ships for the provider, beside the one
// Crossplane's RBAC manager makes (examples/rbac/provider-egressproxy.yaml),
// and the ServiceAccount name its DeploymentRuntimeConfig gives the
// provider.
const (
	RoleInjectedIdentity   = "provider-egressproxy:kubernetes-injected-identity"
	RoleNamespaces         = "provider-egressproxy:namespaces"
	providerServiceAccount = "provider-egressproxy"
	providerRuntimeConfig  = "provider-egressproxy"
	functionRuntimeConfig  = "function-egressproxy"
	runtimeContainer       = "package-runtime"
	endpointCAConfigMap    = "endpoint-ca"
	endpointCADir          = "/etc/egressproxy/endpoint-ca"
	nudgeEvery             = 5 * time.Second

	// RuntimeDefault and RuntimeHA are the provider's runtimes in
	// examples/runtime: one hardened replica, or two with leader election.
	RuntimeDefault = "provider-egressproxy.yaml"
	RuntimeHA      = "ha.yaml"

	// annotationRuntime on the provider's pod template names the rendered
	// runtime (a hash): a roll is done when every pod carries the new one.
	annotationRuntime = "egressproxy.io/runtime-config"
	// layerArgs is the harness's layer of the provider's flags.
	layerArgs = "args"
)

var (
	gvkDeploymentRuntimeConfig = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1beta1", Kind: "DeploymentRuntimeConfig"}
)

const (
	errReadRBAC       = "cannot read examples/rbac/provider-egressproxy.yaml"
	errFmtRBACDocs    = "examples/rbac/provider-egressproxy.yaml: want 2 ClusterRoles and the DeploymentRuntimeConfig %s, got %v"
	errFmtReadRuntime = "cannot read examples/runtime/%s"
	errFmtRuntimeDocs = "examples/runtime/%s: want the DeploymentRuntimeConfig %s with ServiceAccount %s (as examples/rbac's), got %v"
	errRuntimeConfig  = "cannot apply the packages' runtime configuration"
	errFmtRuntimeRoll = "the provider's pods do not run with the new runtime configuration: %s\n%s"
)

// providerRuntime is what the provider's DeploymentRuntimeConfig is made
// of: an example of examples/runtime, applied as a platform team applies
// it, with the harness's layers over it, in order. Each change renders it
// anew, so the examples cannot drift from what the suite runs.
type providerRuntime struct {
	file   string
	layers []runtimeLayer
}

// A runtimeLayer is one addition of the harness to the provider's pod spec
// and runtime container.
type runtimeLayer struct {
	name string
	edit func(spec, container map[string]any)
}

// set adds l, or replaces the layer of its name in place.
func (r *providerRuntime) set(l runtimeLayer) {
	for i := range r.layers {
		if r.layers[i].name == l.name {
			r.layers[i] = l
			return
		}
	}
	r.layers = append(r.layers, l)
}

// applyRuntimeConfigs applies what a platform team applies before
// installing the Configurations so that the Provider and the Function they
// pull in as dependencies run as it wants: examples/rbac's extra
// ClusterRoles and the bindings of those to the provider's ServiceAccount,
// examples/runtime/provider-egressproxy.yaml (the hardened runtime, whose
// DeploymentRuntimeConfig gives that ServiceAccount its stable name, and
// the ImageConfig that attaches it to the provider by its image: a
// dependency has no Provider object of the team's to name one) with the
// registry's prefix, and the function's runtime. The DeploymentRuntimeConfigs
// carry the harness's flags: the provider's polls, the function's metrics
// port, --debug.
func (c *Cluster) applyRuntimeConfigs(ctx context.Context) error {
	objs, err := rbacRoles()
	if err != nil {
		return err
	}
	args := []string{
		// Poll often: gcp and kvm proxies are seen to become ready only at
		// a poll.
		"--poll=5s",
		"--timeout=30s",
	}
	fnArgs := []string{"--metrics-address=:8080"}
	if c.opts.Debug {
		args, fnArgs = append(args, "--debug"), append(fnArgs, "--debug")
	}
	args = append(args, c.opts.ProviderArgs...)
	c.mu.Lock()
	c.runtime.file = RuntimeDefault
	c.runtime.set(runtimeLayer{name: layerArgs, edit: func(_, ct map[string]any) { ct["args"] = anySlice(args) }})
	drc, ic, err := c.renderProviderRuntime()
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if ic == nil {
		return errors.Errorf(errFmtRuntimeDocs, RuntimeDefault, providerRuntimeConfig, providerServiceAccount, "no ImageConfig")
	}
	// The example's prefix names a registry of its own; a platform team
	// changes it to theirs.
	if err := unstructured.SetNestedSlice(ic.Object, []any{map[string]any{"type": "Prefix", "prefix": c.PackageRepo + "/provider-egressproxy"}}, "spec", "matchImages"); err != nil {
		return errors.Wrap(err, errRuntimeConfig)
	}
	fn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "DeploymentRuntimeConfig",
		"metadata": map[string]any{"name": functionRuntimeConfig},
		"spec":     map[string]any{"deploymentTemplate": deploymentTemplate(fnArgs)},
	}}
	objs = append(objs, drc, ic, fn)
	for _, role := range []string{RoleInjectedIdentity, RoleNamespaces} {
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
			"metadata": map[string]any{"name": role},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "namespace": CrossplaneNamespace, "name": providerServiceAccount}},
		}})
	}
	objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "ImageConfig",
		"metadata": map[string]any{"name": "function-egressproxy"},
		"spec": map[string]any{
			"matchImages": []any{map[string]any{"type": "Prefix", "prefix": c.PackageRepo + "/function-egressproxy"}},
			"runtime":     map[string]any{"configRef": map[string]any{"name": functionRuntimeConfig}},
		},
	}})
	return errors.Wrap(Apply(ctx, c.Client, objs...), errRuntimeConfig)
}

// rbacRoles returns the ClusterRoles of examples/rbac/provider-egressproxy.yaml.
// Its DeploymentRuntimeConfig, which only names the ServiceAccount, is the
// one examples/runtime's replace: the harness applies theirs
// (readRuntime checks that they name the same ServiceAccount).
func rbacRoles() ([]*unstructured.Unstructured, error) {
	objs, err := readExample(filepath.Join("examples", "rbac", "provider-egressproxy.yaml"))
	if err != nil {
		return nil, errors.Wrap(err, errReadRBAC)
	}
	var roles []*unstructured.Unstructured
	var kinds []string
	drc := false
	for _, u := range objs {
		kinds = append(kinds, u.GetKind()+" "+u.GetName())
		switch {
		case u.GetKind() == "ClusterRole":
			roles = append(roles, u)
		case u.GetKind() == "DeploymentRuntimeConfig" && u.GetName() == providerRuntimeConfig:
			drc = serviceAccountOf(u) == providerServiceAccount
		}
	}
	if !drc || len(roles) != 2 {
		return nil, errors.Errorf(errFmtRBACDocs, providerRuntimeConfig, kinds)
	}
	return roles, nil
}

// readExample returns the objects of a YAML file of the repository.
func readExample(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), path)) //nolint:gosec // A file of this repository.
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(b), "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return nil, err
		}
		if len(u.Object) != 0 {
			objs = append(objs, u)
		}
	}
	return objs, nil
}

func serviceAccountOf(drc *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(drc.Object, "spec", "serviceAccountTemplate", "metadata", "name")
	return s
}

// readRuntime returns the provider's DeploymentRuntimeConfig of
// examples/runtime/file and its ImageConfig, if it has one.
func readRuntime(file string) (drc, ic *unstructured.Unstructured, err error) {
	objs, err := readExample(filepath.Join("examples", "runtime", file))
	if err != nil {
		return nil, nil, errors.Wrapf(err, errFmtReadRuntime, file)
	}
	var kinds []string
	for _, u := range objs {
		kinds = append(kinds, u.GetKind()+" "+u.GetName())
		switch u.GetKind() {
		case "DeploymentRuntimeConfig":
			if u.GetName() == providerRuntimeConfig && serviceAccountOf(u) == providerServiceAccount {
				drc = u
			}
		case "ImageConfig":
			ic = u
		}
	}
	if drc == nil {
		return nil, nil, errors.Errorf(errFmtRuntimeDocs, file, providerRuntimeConfig, providerServiceAccount, kinds)
	}
	return drc, ic, nil
}

// renderProviderRuntime returns the provider's DeploymentRuntimeConfig: the
// example's with the harness's layers over it, its pod template stamped
// with a hash of the result (annotationRuntime); and the example's
// ImageConfig, if any. Call it with c.mu held.
func (c *Cluster) renderProviderRuntime() (drc, ic *unstructured.Unstructured, err error) {
	drc, ic, err = readRuntime(c.runtime.file)
	if err != nil {
		return nil, nil, err
	}
	return drc, ic, errors.Wrap(renderRuntime(drc, c.runtime.layers), errRuntimeConfig)
}

// renderRuntime applies layers to the pod spec and the runtime container of
// a DeploymentRuntimeConfig, in order, and stamps its pod template.
func renderRuntime(drc *unstructured.Unstructured, layers []runtimeLayer) error {
	spec, _, _ := unstructured.NestedMap(drc.Object, "spec", "deploymentTemplate", "spec", "template", "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	// Crossplane merges the container of this name into the package's.
	containers, _ := spec["containers"].([]any)
	i := slices.IndexFunc(containers, func(o any) bool {
		m, _ := o.(map[string]any)
		return m != nil && m["name"] == runtimeContainer
	})
	if i < 0 {
		containers, i = append([]any{map[string]any{"name": runtimeContainer}}, containers...), 0
	}
	ct, _ := containers[i].(map[string]any)
	for _, l := range layers {
		l.edit(spec, ct)
	}
	containers[i] = ct
	spec["containers"] = containers
	if err := unstructured.SetNestedMap(drc.Object, spec, "spec", "deploymentTemplate", "spec", "template", "spec"); err != nil {
		return err
	}
	// A selector is required by the CRD; the examples carry one.
	if _, ok, _ := unstructured.NestedFieldNoCopy(drc.Object, "spec", "deploymentTemplate", "spec", "selector"); !ok {
		if err := unstructured.SetNestedMap(drc.Object, map[string]any{}, "spec", "deploymentTemplate", "spec", "selector"); err != nil {
			return err
		}
	}
	b, err := json.Marshal(drc.Object["spec"])
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	return unstructured.SetNestedField(drc.Object, hex.EncodeToString(sum[:])[:12],
		"spec", "deploymentTemplate", "spec", "template", "metadata", "annotations", annotationRuntime)
}

// anySlice converts a list of strings for an unstructured object.
func anySlice(s []string) []any {
	a := make([]any, 0, len(s))
	for _, v := range s {
		a = append(a, v)
	}
	return a
}

// deploymentTemplate is a DeploymentRuntimeConfig's deploymentTemplate
// giving the package's container args.
func deploymentTemplate(args []string) map[string]any {
	a := make([]any, 0, len(args))
	for _, s := range args {
		a = append(a, s)
	}
	return map[string]any{"spec": map[string]any{
		"selector": map[string]any{},
		"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": runtimeContainer, "args": a}},
		}},
	}}
}

// editProviderRuntime adds to the provider's runtime the layer named
// volume, which edits the pod spec and the runtime container, and returns
// once the provider's pods run with it (rollProviderRuntime).
func (c *Cluster) editProviderRuntime(ctx context.Context, volume string, edit func(spec, container map[string]any)) error {
	c.mu.Lock()
	c.runtime.set(runtimeLayer{name: volume, edit: edit})
	c.mu.Unlock()
	return c.rollProviderRuntime(ctx)
}

// SetProviderRuntime makes the provider run with file of examples/runtime
// (RuntimeDefault, RuntimeHA) and the harness's layers over it, as a
// platform team applies one over the running provider, and returns once
// only pods of it run and as many as it asks for are ready.
func (c *Cluster) SetProviderRuntime(ctx context.Context, file string) error {
	c.mu.Lock()
	c.runtime.file = file
	c.mu.Unlock()
	return c.rollProviderRuntime(ctx)
}

// rollProviderRuntime writes the rendered runtime into the provider's
// DeploymentRuntimeConfig and returns once every pod of the provider's
// revision carries its stamp and its replicas are ready: Crossplane rolls
// the provider's Deployment.
func (c *Cluster) rollProviderRuntime(ctx context.Context) error {
	c.mu.Lock()
	want, _, err := c.renderProviderRuntime()
	file := c.runtime.file
	c.mu.Unlock()
	if err != nil {
		return err
	}
	stamp, _, _ := unstructured.NestedString(want.Object, "spec", "deploymentTemplate", "spec", "template", "metadata", "annotations", annotationRuntime)
	replicas := int64(1)
	switch r, _, _ := unstructured.NestedFieldNoCopy(want.Object, "spec", "deploymentTemplate", "spec", "replicas"); v := r.(type) {
	case int64:
		replicas = v
	case float64:
		replicas = int64(v)
	}
	drc := Object(gvkDeploymentRuntimeConfig)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Client.Get(ctx, client.ObjectKey{Name: providerRuntimeConfig}, drc); err != nil {
			return err
		}
		drc.Object["spec"] = want.Object["spec"]
		return c.Client.Update(ctx, drc)
	}); err != nil {
		return errors.Wrap(err, errRuntimeConfig)
	}
	// Crossplane v2.4 re-renders a revision's Deployment when a
	// DeploymentRuntimeConfig its Provider's spec.runtimeConfigRef names
	// changes, not one an ImageConfig attaches (its ImageConfig watch only
	// serves pull secrets and rewrites), so the change waits for the
	// revision's next sync. Annotating the revision makes it now, as a
	// platform team can too.
	// Nudged again until the pods roll: the reconcile the first nudge
	// causes may still read the old DeploymentRuntimeConfig from its cache.
	nudges, nudged := 0, time.Time{}
	var why string
	if err := c.waitFor(ctx, nil, runtimeTimeout, "", func(ctx context.Context) (bool, error) {
		if time.Since(nudged) > nudgeEvery {
			nudges++
			nudged = time.Now()
			if err := c.nudgeProviderRevisions(ctx, fmt.Sprintf("%d-%d", drc.GetGeneration(), nudges)); err != nil {
				return false, err
			}
		}
		pods, err := c.ProviderPods(ctx)
		if err != nil {
			why = err.Error()
			return false, nil
		}
		ready := int64(0)
		for _, p := range pods {
			if got := p.Annotations[annotationRuntime]; got != stamp {
				why = fmt.Sprintf("pod %s runs the runtime %q, not %s (%s) yet", p.Name, got, stamp, file)
				return false, nil
			}
			if p.DeletionTimestamp == nil && podReady(&p) {
				ready++
			}
		}
		why = fmt.Sprintf("%d of %d pods of the runtime %s (%s) ready", ready, replicas, stamp, file)
		return ready >= replicas, nil
	}); err != nil {
		return errors.Errorf(errFmtRuntimeRoll, why, c.ProviderLogs(ctx, 30))
	}
	return nil
}

// appendItem appends item to the list m[key], replacing an item of the
// same name.
func appendItem(m map[string]any, key string, item map[string]any) {
	l, _ := m[key].([]any)
	l = slices.DeleteFunc(l, func(o any) bool {
		om, _ := o.(map[string]any)
		return om != nil && om["name"] == item["name"]
	})
	m[key] = append(l, item)
}

// trustEndpointCA makes the provider trust caPEM, the CA of a private
// endpoint (tlsFront), besides nothing else of the system's: a ConfigMap
// the provider's DeploymentRuntimeConfig mounts, and SSL_CERT_FILE naming
// it. The provider's image carries no roots of its own beyond the ones it
// embeds, which Go uses only when no system roots are found.
func (c *Cluster) trustEndpointCA(ctx context.Context, caPEM []byte) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: CrossplaneNamespace, Name: endpointCAConfigMap},
		Data: map[string]string{"ca.crt": string(caPEM)}}
	if err := c.Client.Create(ctx, cm); client.IgnoreAlreadyExists(err) != nil {
		return errors.Wrap(err, errRuntimeConfig)
	}
	return c.editProviderRuntime(ctx, endpointCAConfigMap, func(spec, ct map[string]any) {
		appendItem(spec, "volumes", map[string]any{"name": endpointCAConfigMap, "configMap": map[string]any{"name": endpointCAConfigMap}})
		appendItem(ct, "volumeMounts", map[string]any{"name": endpointCAConfigMap, "mountPath": endpointCADir, "readOnly": true})
		appendItem(ct, "env", map[string]any{"name": "SSL_CERT_FILE", "value": endpointCADir + "/ca.crt"})
	})
}

// nudgeProviderRevisions annotates the provider's revisions, which makes
// Crossplane's runtime reconcile them (render their Deployments) now.
func (c *Cluster) nudgeProviderRevisions(ctx context.Context, value string) error {
	revs := &unstructured.UnstructuredList{}
	revs.SetGroupVersionKind(ProviderRevision.GroupVersion().WithKind(ProviderRevision.Kind + "List"))
	if err := c.Client.List(ctx, revs, client.MatchingLabels{LabelPackage: ProviderName}); err != nil {
		return errors.Wrap(err, errRuntimeConfig)
	}
	for i := range revs.Items {
		r := &revs.Items[i]
		p := client.MergeFrom(r.DeepCopy())
		a := r.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a["egressproxy.io/runtime-config-nudge"] = value
		r.SetAnnotations(a)
		if err := c.Client.Patch(ctx, r, p); err != nil {
			return errors.Wrap(err, errRuntimeConfig)
		}
	}
	return nil
}
