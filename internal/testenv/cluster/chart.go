/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

// Crossplane is installed from its own Helm chart, the one in the
// github.com/crossplane/crossplane/v2 module the crossplane-core binary is
// built from (cluster/charts/crossplane), with examples/crossplane/values.yaml:
// the Deployments, RBAC, Services and Secrets a platform team gets from
// `helm upgrade --install crossplane`.
//
// Why not the helm CLI: helm v4.3.2 is served, but it brings k8s.io v0.37
// (client-go v0.37.2), a second Kubernetes to compile beside ours: its cold
// build (empty GOCACHE, -p 2) took 7m35s here on a shared 2-core machine, 4m42s
// of CPU, so at best ~2.5 min on idle cores, added to every cold CI run,
// plus a tool in hack/tools.sh, for a chart whose templates call 15
// functions (include template tpl toYaml nindent indent quote default replace
// trunc trimSuffix printf not or and). So the chart is rendered here, the way
// helm's engine renders it (helm.sh/helm/v4@v4.3.2 pkg/engine/engine.go,
// funcs.go): Go's text/template with sprig's function map (the same
// github.com/Masterminds/sprig/v3 v3.3.0 helm uses, env and expandenv removed)
// plus helm's own include, tpl, required, toYaml and fromYaml; values
// coalesced over the chart's values.yaml as helm does (a null removes a key);
// .Release, .Chart and .Template as helm builds them; NOTES.txt and partials
// (_*.tpl) not rendered; objects in helm's install order (pkg/release/v1/util
// kind_sorter.go). Then each object is server-side applied, carrying helm's
// ownership metadata, so a later `helm upgrade --install crossplane` adopts
// them instead of refusing them. Not supported, and not used by the chart:
// .Capabilities (only NOTES.txt reads it), .Files, lookup, subcharts, hooks
// (an error) and values.schema.json.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

const (
	// CrossplaneRelease is the Helm release name Crossplane's docs install
	// the chart as; the chart names its objects after the chart, not the
	// release, so only labels carry it.
	CrossplaneRelease = "crossplane"

	// What helm records on every object of a release (helm's
	// pkg/action/validate.go), and checks before it adopts an existing one.
	helmManagedByLabel             = "app.kubernetes.io/managed-by"
	helmManagedBy                  = "Helm"
	helmReleaseNameAnnotation      = "meta.helm.sh/release-name"
	helmReleaseNamespaceAnnotation = "meta.helm.sh/release-namespace"

	// What makes an object a hook, which helm runs around an install
	// rather than installing it.
	helmHookAnnotation = "helm.sh/hook"

	// helm's limit on nested include calls of one template.
	maxIncludeDepth = 1000
)

const (
	errFmtReadChart   = "cannot read the chart's %s"
	errFmtParseChart  = "cannot parse the chart's %s"
	errFmtRender      = "cannot render the chart's %s"
	errFmtTplParse    = "cannot parse the template %q of tpl"
	errTplExecute     = "cannot execute tpl"
	errCloneTemplates = "cannot clone the chart's templates for tpl"
	errFmtInclude     = "include %q nests more than %d times"
	errReadValues     = "cannot read the values file"
	errParseValues    = "cannot parse the values file"
	errFmtNoNamespace = "cannot create the namespace %s of the chart"
	errFmtHook        = "%s %s is a helm hook, which this renderer does not run"
)

// CrossplaneValuesFile is the values file the harness installs Crossplane's
// chart with, the one docs tell platform teams to use.
func CrossplaneValuesFile() string {
	return filepath.Join(testenv.RepoRoot(), "examples", "crossplane", "values.yaml")
}

// crossplaneChartDir is the chart in the folder of the
// github.com/crossplane/crossplane/v2 module that crossplaneCRDs returns the
// CRDs of (its cluster/crds).
func crossplaneChartDir(crdsDir string) string {
	return filepath.Join(filepath.Dir(crdsDir), "charts", "crossplane")
}

// crossplaneValues returns the values of a values file with the image the
// harness built: the chart's default image is the release's, on a public
// registry this harness cannot reach, and its Chart.yaml says appVersion
// 0.0.1, so the tag must be set. Extra core arguments (such as --debug) are
// appended to the file's args.
func crossplaneValues(file, repository, tag string, extraArgs ...string) (map[string]any, error) {
	b, err := os.ReadFile(file) //nolint:gosec // The harness's own file.
	if err != nil {
		return nil, errors.Wrap(err, errReadValues)
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal(b, &vals); err != nil {
		return nil, errors.Wrap(err, errParseValues)
	}
	vals = coalesceValues(vals, map[string]any{"image": map[string]any{"repository": repository, "tag": tag}})
	if len(extraArgs) > 0 {
		args, _ := vals["args"].([]any)
		for _, a := range extraArgs {
			args = append(args, a)
		}
		vals["args"] = args
	}
	return vals, nil
}

// renderCrossplaneChart renders the chart in chartDir with values over its
// own values.yaml, as release CrossplaneRelease in namespace, as
// `helm template` would. The objects come in the order helm installs them.
func renderCrossplaneChart(chartDir string, values map[string]any, namespace string) ([]*unstructured.Unstructured, error) {
	meta, err := readChartMetadata(chartDir)
	if err != nil {
		return nil, err
	}
	defaults := map[string]any{}
	if err := readYAML(filepath.Join(chartDir, "values.yaml"), &defaults); err != nil {
		return nil, err
	}
	top := map[string]any{
		"Chart":  meta,
		"Values": coalesceValues(defaults, values),
		"Release": map[string]any{
			"Name":      CrossplaneRelease,
			"Namespace": namespace,
			"IsUpgrade": false,
			"IsInstall": true,
			"Revision":  1,
			"Service":   helmManagedBy,
		},
	}
	chartName, _ := meta["Name"].(string)
	rendered, err := renderTemplates(chartDir, chartName, top)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, r := range rendered {
		o, err := Decode(r.name, []byte(r.text))
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}
	for _, o := range objs {
		if _, ok := o.GetAnnotations()[helmHookAnnotation]; ok {
			return nil, errors.Errorf(errFmtHook, o.GetKind(), o.GetName())
		}
		o.SetLabels(withEntry(o.GetLabels(), helmManagedByLabel, helmManagedBy))
		a := withEntry(o.GetAnnotations(), helmReleaseNameAnnotation, CrossplaneRelease)
		o.SetAnnotations(withEntry(a, helmReleaseNamespaceAnnotation, namespace))
	}
	sortForInstall(objs)
	return objs, nil
}

func withEntry(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// readChartMetadata returns Chart.yaml as templates see it in .Chart: helm's
// chart.Metadata as a map of its Go field names.
func readChartMetadata(chartDir string) (map[string]any, error) {
	var m struct {
		APIVersion  string            `json:"apiVersion"`
		Name        string            `json:"name"`
		Version     string            `json:"version"`
		AppVersion  string            `json:"appVersion"`
		KubeVersion string            `json:"kubeVersion"`
		Description string            `json:"description"`
		Type        string            `json:"type"`
		Home        string            `json:"home"`
		Icon        string            `json:"icon"`
		Deprecated  bool              `json:"deprecated"`
		Keywords    []string          `json:"keywords"`
		Sources     []string          `json:"sources"`
		Annotations map[string]string `json:"annotations"`
	}
	if err := readYAML(filepath.Join(chartDir, "Chart.yaml"), &m); err != nil {
		return nil, err
	}
	return map[string]any{
		"APIVersion": m.APIVersion, "Name": m.Name, "Version": m.Version, "AppVersion": m.AppVersion,
		"KubeVersion": m.KubeVersion, "Description": m.Description, "Type": m.Type, "Home": m.Home,
		"Icon": m.Icon, "Deprecated": m.Deprecated, "Keywords": m.Keywords, "Sources": m.Sources,
		"Annotations": m.Annotations,
	}, nil
}

// readYAML reads a chart file as helm does: YAML through JSON
// (sigs.k8s.io/yaml), so numbers in values are float64, as in helm.
func readYAML(file string, into any) error {
	b, err := os.ReadFile(file) //nolint:gosec // A chart in the Go module cache.
	if err != nil {
		return errors.Wrapf(err, errFmtReadChart, filepath.Base(file))
	}
	return errors.Wrapf(yaml.Unmarshal(b, into), errFmtParseChart, filepath.Base(file))
}

// coalesceValues returns src over dst, as helm coalesces user values over a
// chart's: tables merge key by key, anything else in src replaces dst's, and
// a null in src removes the key. Neither argument is changed.
func coalesceValues(dst, src map[string]any) map[string]any {
	out := make(map[string]any, len(dst))
	for k, v := range dst {
		out[k] = v
	}
	for k, v := range src {
		if v == nil {
			delete(out, k)
			continue
		}
		sm, sok := v.(map[string]any)
		dm, dok := out[k].(map[string]any)
		if sok && dok {
			out[k] = coalesceValues(dm, sm)
			continue
		}
		out[k] = v
	}
	return out
}

type renderedFile struct {
	name string // chart name/templates/file
	text string
}

// renderTemplates parses every file under templates/ into one template set,
// named <chart>/templates/<file> as helm names them, and executes each but
// the partials and NOTES.txt in name order.
func renderTemplates(chartDir, chartName string, top map[string]any) ([]renderedFile, error) {
	root := filepath.Join(chartDir, "templates")
	var names []string
	sources := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p) //nolint:gosec // A chart in the Go module cache.
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		n := path.Join(chartName, "templates", filepath.ToSlash(rel))
		names = append(names, n)
		sources[n] = string(b)
		return nil
	})
	if err != nil {
		return nil, errors.Wrapf(err, errFmtReadChart, "templates")
	}
	sort.Strings(names)

	t := template.New("gotpl").Option("missingkey=zero")
	t.Funcs(chartFuncs(t, map[string]int{}))
	for _, n := range names {
		if _, err := t.New(n).Parse(sources[n]); err != nil {
			return nil, errors.Wrapf(err, errFmtParseChart, n)
		}
	}
	var out []renderedFile
	for _, n := range names {
		if base := path.Base(n); strings.HasPrefix(base, "_") || base == "NOTES.txt" {
			continue
		}
		vals := make(map[string]any, len(top)+1)
		for k, v := range top {
			vals[k] = v
		}
		vals["Template"] = map[string]any{"Name": n, "BasePath": path.Join(chartName, "templates")}
		buf := &bytes.Buffer{}
		if err := t.ExecuteTemplate(buf, n, vals); err != nil {
			return nil, errors.Wrapf(err, errFmtRender, n)
		}
		// missingkey=zero still prints "<no value>" for a missing key of a
		// map of interfaces; helm removes it.
		out = append(out, renderedFile{name: n, text: strings.ReplaceAll(buf.String(), "<no value>", "")})
	}
	return out, nil
}

// chartFuncs is helm's template function map (pkg/engine/funcs.go funcMap
// and engine.go initFunMap) for the template set t: sprig's, without env
// and expandenv, plus helm's functions the chart may call.
func chartFuncs(t *template.Template, included map[string]int) template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	f["toYaml"] = toYAML
	f["fromYaml"] = fromYAML
	f["include"] = func(tplName string, data any) (string, error) {
		if included[tplName] > maxIncludeDepth {
			return "", errors.Errorf(errFmtInclude, tplName, maxIncludeDepth)
		}
		included[tplName]++
		defer func() { included[tplName]-- }()
		buf := &bytes.Buffer{}
		err := t.ExecuteTemplate(buf, tplName, data)
		return buf.String(), err
	}
	f["tpl"] = func(text string, data any) (string, error) {
		// A clone, so the text sees the chart's named templates and its
		// own defines do not leak into them.
		c, err := t.Clone()
		if err != nil {
			return "", errors.Wrap(err, errCloneTemplates)
		}
		c.Option("missingkey=zero")
		c.Funcs(chartFuncs(c, included))
		c, err = c.New(t.Name()).Parse(text)
		if err != nil {
			return "", errors.Wrapf(err, errFmtTplParse, text)
		}
		buf := &bytes.Buffer{}
		if err := c.Execute(buf, data); err != nil {
			return "", errors.Wrap(err, errTplExecute)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	f["required"] = func(msg string, v any) (any, error) {
		if s, ok := v.(string); v == nil || (ok && s == "") {
			return v, errors.New(msg)
		}
		return v, nil
	}
	return f
}

// toYAML is helm's toYaml: errors give "", and the last newline goes.
func toYAML(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// fromYAML is helm's fromYaml: an error goes into the map's "Error".
func fromYAML(s string) map[string]any {
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

// helmInstallOrder is the order helm creates kinds in
// (pkg/release/v1/util/kind_sorter.go InstallOrder); other kinds come
// after, by kind name.
var helmInstallOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
	"PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass",
	"PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole",
	"ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding",
	"RoleBindingList", "Service", "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
	"HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
	"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
}

// sortForInstall sorts objects into helm's install order, keeping the
// rendered order within a kind.
func sortForInstall(objs []*unstructured.Unstructured) {
	rank := func(kind string) int {
		if i := slices.Index(helmInstallOrder, kind); i >= 0 {
			return i
		}
		return len(helmInstallOrder)
	}
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		ra, rb := rank(a.GetKind()), rank(b.GetKind())
		if ra != rb || ra < len(helmInstallOrder) {
			return ra - rb
		}
		return strings.Compare(a.GetKind(), b.GetKind())
	})
}

// applyCrossplaneChart server-side applies rendered chart objects, as the
// harness's field owner, in their order, after the namespaces they live in
// (helm's --create-namespace). A namespaced object the chart left without a
// namespace goes to the release's, as helm puts it there. The objects are
// not changed, so they can be applied again.
func applyCrossplaneChart(ctx context.Context, c client.Client, rendered []*unstructured.Unstructured) error {
	objs := make([]*unstructured.Unstructured, len(rendered))
	for i, o := range rendered {
		// Apply writes the server's answer into the object.
		objs[i] = o.DeepCopy()
	}
	var namespaces []string
	for _, o := range objs {
		if o.GetNamespace() == "" {
			namespaced, err := c.IsObjectNamespaced(o)
			if err != nil {
				return errors.Wrapf(err, errFmtApply, o.GetKind(), o.GetName())
			}
			if namespaced {
				o.SetNamespace(o.GetAnnotations()[helmReleaseNamespaceAnnotation])
			}
		}
		if ns := o.GetNamespace(); ns != "" && !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	for _, ns := range namespaces {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Namespace")
		u.SetName(ns)
		if err := Apply(ctx, c, u); err != nil {
			return errors.Wrapf(err, errFmtNoNamespace, ns)
		}
	}
	return Apply(ctx, c, objs...)
}

// crossplaneInstall is what installing Crossplane from its chart takes.
type crossplaneInstall struct {
	// ChartDir is the chart (crossplaneChartDir).
	ChartDir string
	// ValuesFile is the platform's values (CrossplaneValuesFile).
	ValuesFile string
	// Repository and Tag name the core image as the nodes pull it, such as
	// 10.88.0.1:5000/crossplane-system/crossplane and v2.4.2-<key>.
	Repository, Tag string
	// RegistryCA is the PEM CA of the package registry, which core trusts
	// through the ConfigMap the values name.
	RegistryCA []byte
	// ExtraArgs of core start, such as --debug.
	ExtraArgs []string
}

// installCrossplane creates the registry CA ConfigMap the values name (as
// values.yaml tells a platform team to) and applies the chart over it. It
// does not wait: crossplaneAvailable says when the Deployments are.
func installCrossplane(ctx context.Context, c client.Client, in crossplaneInstall) error {
	vals, err := crossplaneValues(in.ValuesFile, in.Repository, in.Tag, in.ExtraArgs...)
	if err != nil {
		return err
	}
	objs, err := renderCrossplaneChart(in.ChartDir, vals, CrossplaneNamespace)
	if err != nil {
		return err
	}
	if ca, _ := vals["registryCaBundleConfig"].(map[string]any); ca != nil {
		cmName, _ := ca["name"].(string)
		key, _ := ca["key"].(string)
		if cmName != "" && key != "" {
			cm := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": cmName, "namespace": CrossplaneNamespace},
				"data":     map[string]any{key: string(in.RegistryCA)},
			}}
			objs = append([]*unstructured.Unstructured{cm}, objs...)
			sortForInstall(objs)
		}
	}
	return applyCrossplaneChart(ctx, c, objs)
}

// crossplaneDeployments are the Deployments the chart makes.
var crossplaneDeployments = []string{"crossplane", "crossplane-rbac-manager"}

const errFmtGetDeployment = "cannot get Deployment %s"

// crossplaneAvailable reports whether core and the RBAC manager are
// Available, and if not, why, for a wait loop's last message.
func crossplaneAvailable(ctx context.Context, c client.Client) (bool, string, error) {
	for _, n := range crossplaneDeployments {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: CrossplaneNamespace, Name: n}, d); err != nil {
			return false, "", errors.Wrapf(err, errFmtGetDeployment, n)
		}
		if ok, why := deploymentAvailable(d); !ok {
			return false, n + ": " + why, nil
		}
	}
	return true, "", nil
}

// deploymentAvailable reports whether a Deployment's controller has seen
// its current spec and says it is Available, and if not, why.
func deploymentAvailable(d *appsv1.Deployment) (bool, string) {
	if d.Status.ObservedGeneration < d.Generation {
		return false, "the Deployment controller has not seen the current spec"
	}
	for _, c := range d.Status.Conditions {
		if c.Type != appsv1.DeploymentAvailable {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return true, ""
		}
		return false, fmt.Sprintf("not Available: %s: %s", c.Reason, c.Message)
	}
	return false, fmt.Sprintf("no Available condition yet (%d of %d replicas ready)", d.Status.ReadyReplicas, d.Status.Replicas)
}

const (
	errPushRef   = "cannot parse the image reference to push to"
	errPushRead  = "cannot read the image tarball"
	errPushWrite = "cannot push the image"
)

// pushImage pushes the one image of a docker-archive (such as
// hack/system-images.sh's crossplane.tar) to ref, and returns its digest.
// The registry is the same whatever host name a ref gives it, so the host
// pushes to 127.0.0.1:P while the nodes pull the same repository from the
// address they reach it at.
func pushImage(ctx context.Context, file, ref string, rt http.RoundTripper) (string, error) {
	r, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		return "", errors.Wrap(err, errPushRef)
	}
	img, err := tarball.ImageFromPath(file, nil)
	if err != nil {
		return "", errors.Wrap(err, errPushRead)
	}
	d, err := img.Digest()
	if err != nil {
		return "", errors.Wrap(err, errPushRead)
	}
	return d.String(), errors.Wrap(remote.Write(r, img, remote.WithContext(ctx), remote.WithTransport(rt)), errPushWrite)
}
