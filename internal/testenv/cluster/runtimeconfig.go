/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
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
)

var (
	gvkDeploymentRuntimeConfig = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1beta1", Kind: "DeploymentRuntimeConfig"}
)

const (
	errReadRBAC       = "cannot read examples/rbac/provider-egressproxy.yaml"
	errFmtRBACDocs    = "examples/rbac/provider-egressproxy.yaml: want 2 ClusterRoles and the DeploymentRuntimeConfig %s, got %v"
	errRuntimeConfig  = "cannot apply the packages' runtime configuration"
	errFmtRuntimeRoll = "the provider's pods do not run with the new runtime configuration: %s\n%s"
)

// applyRuntimeConfigs applies what a platform team applies before
// installing the Configurations so that the Provider and the Function they
// pull in as dependencies run as it wants: examples/rbac (the provider's
// extra ClusterRoles and its DeploymentRuntimeConfig, which gives its
// ServiceAccount a stable name), the bindings of those ClusterRoles to that
// ServiceAccount, and ImageConfigs that attach a DeploymentRuntimeConfig to
// each package by its image (a dependency has no Provider object of the
// team's to name one). The DeploymentRuntimeConfigs carry the harness's
// flags: the provider's polls, the function's metrics port, --debug.
func (c *Cluster) applyRuntimeConfigs(ctx context.Context) error {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "rbac", "provider-egressproxy.yaml"))
	if err != nil {
		return errors.Wrap(err, errReadRBAC)
	}
	var objs []*unstructured.Unstructured
	var kinds []string
	var drc *unstructured.Unstructured
	for _, doc := range strings.Split(string(b), "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return errors.Wrap(err, errReadRBAC)
		}
		if len(u.Object) == 0 {
			continue
		}
		kinds = append(kinds, u.GetKind()+" "+u.GetName())
		if u.GetKind() == "DeploymentRuntimeConfig" && u.GetName() == providerRuntimeConfig {
			drc = u
			continue
		}
		objs = append(objs, u)
	}
	if drc == nil || len(objs) != 2 {
		return errors.Errorf(errFmtRBACDocs, providerRuntimeConfig, kinds)
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
	if err := unstructured.SetNestedField(drc.Object, deploymentTemplate(args), "spec", "deploymentTemplate"); err != nil {
		return errors.Wrap(err, errRuntimeConfig)
	}
	fn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "DeploymentRuntimeConfig",
		"metadata": map[string]any{"name": functionRuntimeConfig},
		"spec":     map[string]any{"deploymentTemplate": deploymentTemplate(fnArgs)},
	}}
	objs = append(objs, drc, fn)
	for _, role := range []string{RoleInjectedIdentity, RoleNamespaces} {
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
			"metadata": map[string]any{"name": role},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "namespace": CrossplaneNamespace, "name": providerServiceAccount}},
		}})
	}
	for pkg, cfg := range map[string]string{"provider-egressproxy": providerRuntimeConfig, "function-egressproxy": functionRuntimeConfig} {
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "ImageConfig",
			"metadata": map[string]any{"name": pkg},
			"spec": map[string]any{
				"matchImages": []any{map[string]any{"type": "Prefix", "prefix": c.PackageRepo + "/" + pkg}},
				"runtime":     map[string]any{"configRef": map[string]any{"name": cfg}},
			},
		}})
	}
	return errors.Wrap(Apply(ctx, c.Client, objs...), errRuntimeConfig)
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

// editProviderRuntime changes the pod spec and the runtime container of the
// provider's DeploymentRuntimeConfig with edit, and returns once only pods
// with the volume named volume run, one of them ready: Crossplane rolls
// the provider's Deployment.
func (c *Cluster) editProviderRuntime(ctx context.Context, volume string, edit func(spec, container map[string]any)) error {
	drc := Object(gvkDeploymentRuntimeConfig)
	if err := c.Client.Get(ctx, client.ObjectKey{Name: providerRuntimeConfig}, drc); err != nil {
		return errors.Wrap(err, errRuntimeConfig)
	}
	spec, _, _ := unstructured.NestedMap(drc.Object, "spec", "deploymentTemplate", "spec", "template", "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	containers, _ := spec["containers"].([]any)
	if len(containers) == 0 {
		containers = []any{map[string]any{"name": runtimeContainer}}
	}
	ct, _ := containers[0].(map[string]any)
	edit(spec, ct)
	containers[0] = ct
	spec["containers"] = containers
	if err := unstructured.SetNestedMap(drc.Object, spec, "spec", "deploymentTemplate", "spec", "template", "spec"); err != nil {
		return errors.Wrap(err, errRuntimeConfig)
	}
	if err := c.Client.Update(ctx, drc); err != nil {
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
		ready := 0
		for _, p := range pods {
			if !slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == volume }) {
				why = "pod " + p.Name + " has no volume " + volume + " yet"
				return false, nil
			}
			if podReady(&p) {
				ready++
			}
		}
		why = "no ready pod with volume " + volume
		return ready > 0, nil
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
