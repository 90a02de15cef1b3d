/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"archive/tar"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/ociregistry"
)

// writeChart writes a chart of the given templates into a new folder.
func writeChart(t *testing.T, values string, templates map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: demo\nversion: 1.2.3+build\nappVersion: 0.0.1\n",
		"values.yaml": values,
	}
	for n, s := range templates {
		files[filepath.Join("templates", n)] = s
	}
	for n, s := range files {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// brief is an object as kind/namespace/name plus its data, for diffs.
type brief struct {
	ID   string
	Data map[string]any `json:",omitempty"`
}

func briefs(objs []*unstructured.Unstructured) []brief {
	out := make([]brief, 0, len(objs))
	for _, o := range objs {
		d, _, _ := unstructured.NestedMap(o.Object, "data")
		id := o.GetKind() + "/" + o.GetName()
		if ns := o.GetNamespace(); ns != "" {
			id = o.GetKind() + "/" + ns + "/" + o.GetName()
		}
		out = append(out, brief{ID: id, Data: d})
	}
	return out
}

func TestChartRender(t *testing.T) {
	cm := func(name, data string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: {{ .Release.Namespace }}\ndata:\n" + data
	}
	type want struct {
		objs []brief
		err  *regexp.Regexp
	}
	cases := map[string]struct {
		reason    string
		values    string
		user      map[string]any
		templates map[string]string
		want      want
	}{
		"HelmObjects": {
			reason: ".Release, .Chart and .Template are what helm gives templates.",
			templates: map[string]string{"cm.yaml": cm("meta",
				"  release: {{ .Release.Name }}/{{ .Release.Namespace }}/{{ .Release.Service }}/{{ .Release.IsInstall }}/{{ .Release.Revision }}\n"+
					"  chart: {{ .Chart.Name }}-{{ .Chart.Version | replace \"+\" \"_\" }}-{{ .Chart.AppVersion }}\n"+
					"  template: {{ .Template.Name }} {{ .Template.BasePath }}\n")},
			want: want{objs: []brief{{ID: "ConfigMap/ns/meta", Data: map[string]any{
				"release":  "crossplane/ns/Helm/true/1",
				"chart":    "demo-1.2.3_build-0.0.1",
				"template": "demo/templates/cm.yaml demo/templates",
			}}}},
		},
		"IncludeAndPartials": {
			reason: "Named templates in partials are included and piped; partials and NOTES.txt render nothing.",
			templates: map[string]string{
				"_helpers.tpl": `{{- define "demo.name" -}}{{ default .Chart.Name .Values.nameOverride | trunc 3 | trimSuffix "-" }}{{- end -}}` +
					"\n{{- define \"demo.labels\" }}\nname: {{ include \"demo.name\" . }}\n{{- end }}\n",
				"cm.yaml":   cm("{{ template \"demo.name\" . }}", "  {{- include \"demo.labels\" . | indent 2 }}\n"),
				"NOTES.txt": "Kube Version: {{ .Capabilities.KubeVersion }}\n",
			},
			values: "nameOverride: ab-cd\n",
			want:   want{objs: []brief{{ID: "ConfigMap/ns/ab", Data: map[string]any{"name": "ab"}}}},
		},
		"ValuesCoalesce": {
			reason: "User values merge into the chart's tables; a null removes a default; lists are replaced.",
			values: "a: {b: 1, c: 2}\nlist: [x, y]\nkeep: kept\n",
			user:   map[string]any{"a": map[string]any{"c": nil, "d": 3}, "list": []any{"z"}},
			templates: map[string]string{"cm.yaml": cm("v",
				"  a: {{ .Values.a | toYaml | quote }}\n  list: {{ .Values.list | toJson | quote }}\n  keep: {{ .Values.keep | quote }}\n")},
			want: want{objs: []brief{{ID: "ConfigMap/ns/v", Data: map[string]any{
				"a": "b: 1\nd: 3", "list": `["z"]`, "keep": "kept",
			}}}},
		},
		"ToYamlNindentAndNoValue": {
			reason: "toYaml drops its last newline; a missing value prints nothing, not <no value>.",
			values: "labels: {team: a, tier: b}\n",
			templates: map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yaml\n  namespace: ns\n" +
				"  labels: {{ toYaml .Values.labels | nindent 4 }}\ndata:\n  missing: \"{{ .Values.nothing }}\"\n"},
			want: want{objs: []brief{{ID: "ConfigMap/ns/yaml", Data: map[string]any{"missing": ""}}}},
		},
		"Tpl": {
			reason: "tpl renders a value as a template that sees the chart's named templates and the given data.",
			values: "extraObjects:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: '{{ include \"demo.n\" . }}-extra', namespace: '{{ .Release.Namespace }}'}\n",
			templates: map[string]string{
				"_h.tpl":     `{{ define "demo.n" }}{{ .Chart.Name }}{{ end }}`,
				"extra.yaml": "{{ range .Values.extraObjects }}\n---\n{{ tpl (toYaml .) $ }}\n{{ end }}\n",
			},
			want: want{objs: []brief{{ID: "ConfigMap/ns/demo-extra"}}},
		},
		"Required": {
			reason:    "required fails the render with its message when the value is missing or empty.",
			values:    "name: \"\"\n",
			templates: map[string]string{"cm.yaml": cm(`{{ required "name is required" .Values.name }}`, "  a: b\n")},
			want:      want{err: regexp.MustCompile(`name is required`)},
		},
		"NoEnv": {
			reason:    "helm removes sprig's env, so a chart cannot read the installer's environment.",
			templates: map[string]string{"cm.yaml": cm(`{{ env "HOME" }}`, "  a: b\n")},
			want:      want{err: regexp.MustCompile(`function "env" not defined`)},
		},
		"Hook": {
			reason:    "A helm hook is not an object helm installs; rendering one is an error rather than a silent install.",
			templates: map[string]string{"job.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  annotations: {helm.sh/hook: pre-install}\n"},
			want:      want{err: regexp.MustCompile(`Job j is a helm hook`)},
		},
		"InstallOrder": {
			reason: "Objects come in helm's install order; unknown kinds last, by kind; the same kind in file name, then file order.",
			templates: map[string]string{
				"a.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: ns}\n---\n" +
					"apiVersion: example.org/v1\nkind: Zeta\nmetadata: {name: z}\n---\n" +
					"apiVersion: example.org/v1\nkind: Alpha\nmetadata: {name: a}\n",
				"b.yaml": "# only a comment\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa2, namespace: ns}\n---\n" +
					"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: cr}\n---\n" +
					"apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa1, namespace: ns}\n",
			},
			want: want{objs: []brief{
				{ID: "ServiceAccount/ns/sa2"}, {ID: "ServiceAccount/ns/sa1"}, {ID: "ClusterRole/cr"},
				{ID: "Deployment/ns/d"}, {ID: "Alpha/a"}, {ID: "Zeta/z"},
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := writeChart(t, tc.values, tc.templates)
			objs, err := renderCrossplaneChart(dir, tc.user, "ns")
			if tc.want.err != nil {
				if err == nil || !tc.want.err.MatchString(err.Error()) {
					t.Fatalf("\n%s\nrenderCrossplaneChart(...): error %v, want one matching %q", tc.reason, err, tc.want.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("\n%s\nrenderCrossplaneChart(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.objs, briefs(objs)); diff != "" {
				t.Errorf("\n%s\nrenderCrossplaneChart(...): -want, +got:\n%s", tc.reason, diff)
			}
			for _, o := range objs {
				want := map[string]string{helmReleaseNameAnnotation: CrossplaneRelease, helmReleaseNamespaceAnnotation: "ns"}
				got := map[string]string{}
				for k := range want {
					got[k] = o.GetAnnotations()[k]
				}
				if diff := cmp.Diff(want, got); diff != "" || o.GetLabels()[helmManagedByLabel] != helmManagedBy {
					t.Errorf("%s %s: helm's ownership metadata missing: labels %v, annotations -want, +got:\n%s",
						o.GetKind(), o.GetName(), o.GetLabels(), diff)
				}
			}
		})
	}
}

func TestChartCrossplaneValues(t *testing.T) {
	vals, err := crossplaneValues(CrossplaneValuesFile(), "10.88.0.1:5000/crossplane-system/crossplane", "v2.4.2", "--debug")
	if err != nil {
		t.Fatalf("crossplaneValues(...): %v", err)
	}
	want := map[string]any{
		"image":                  map[string]any{"repository": "10.88.0.1:5000/crossplane-system/crossplane", "tag": "v2.4.2"},
		"registryCaBundleConfig": map[string]any{"name": "registry-ca", "key": "ca.crt"},
		"args":                   []any{"--enable-dependency-version-upgrades", "--poll-interval=15s", "--debug"},
		"metrics":                map[string]any{"enabled": true},
	}
	if diff := cmp.Diff(want, vals); diff != "" {
		t.Errorf("crossplaneValues(examples/crossplane/values.yaml, ...): -want, +got:\n%s", diff)
	}
}

// crossplaneChart returns the chart of the Crossplane release hack/tools.sh
// builds core from, from the Go module cache (downloading it if needed).
func crossplaneChart(t *testing.T) (dir, version string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "hack", "tools.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CROSSPLANE_CORE_VERSION=(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("hack/tools.sh sets no CROSSPLANE_CORE_VERSION")
	}
	version = string(m[1])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "github.com/crossplane/crossplane/v2@"+version)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, err := cmd.Output()
	var mod struct{ Dir string }
	if err != nil || json.Unmarshal(out, &mod) != nil || mod.Dir == "" {
		testenv.Missing(t, "the github.com/crossplane/crossplane/v2@%s module (go mod download: %v)", version, err)
	}
	return crossplaneChartDir(filepath.Join(mod.Dir, "cluster", "crds")), version
}

// testCoreRepo is where the nodes would pull core's image from.
const testCoreRepo = "10.88.0.1:5000/crossplane-system/crossplane"

// renderOurCrossplane renders Crossplane's chart as the harness does, with
// the image testCoreRepo:<Crossplane's version>.
func renderOurCrossplane(t *testing.T) (objs []*unstructured.Unstructured, image string) {
	t.Helper()
	dir, version := crossplaneChart(t)
	repo := testCoreRepo
	vals, err := crossplaneValues(CrossplaneValuesFile(), repo, version)
	if err != nil {
		t.Fatal(err)
	}
	objs, err = renderCrossplaneChart(dir, vals, CrossplaneNamespace)
	if err != nil {
		t.Fatalf("renderCrossplaneChart(%s): %v", dir, err)
	}
	return objs, repo + ":" + version
}

// typed returns the object of a kind and name as its typed struct, failing
// on fields the type does not have.
func typed[T any](t *testing.T, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			out := new(T)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return out
		}
	}
	t.Fatalf("the chart renders no %s %s", kind, name)
	return nil
}

func envOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			m[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
		case e.ValueFrom != nil:
			m[e.Name] = "valueFrom"
		default:
			m[e.Name] = e.Value
		}
	}
	return m
}

// TestChartCrossplane renders Crossplane's real chart with
// examples/crossplane/values.yaml and checks what the harness and the
// package runtime rely on.
func TestChartCrossplane(t *testing.T) {
	objs, image := renderOurCrossplane(t)

	t.Run("Objects", func(t *testing.T) {
		want := []string{
			"ServiceAccount/crossplane-system/rbac-manager",
			"ServiceAccount/crossplane-system/crossplane",
			"Secret/crossplane-system/crossplane-root-ca",
			"Secret/crossplane-system/crossplane-tls-server",
			"Secret/crossplane-system/crossplane-tls-client",
			"ClusterRole/crossplane",
			"ClusterRole/crossplane:system:aggregate-to-crossplane",
			"ClusterRole/crossplane:allowed-provider-permissions",
			"ClusterRole/crossplane-rbac-manager",
			"ClusterRole/crossplane-admin",
			"ClusterRole/crossplane-edit",
			"ClusterRole/crossplane-view",
			"ClusterRole/crossplane-browse",
			"ClusterRole/crossplane:aggregate-to-admin",
			"ClusterRole/crossplane:aggregate-to-edit",
			"ClusterRole/crossplane:aggregate-to-view",
			"ClusterRole/crossplane:aggregate-to-browse",
			"ClusterRoleBinding/crossplane",
			"ClusterRoleBinding/crossplane-rbac-manager",
			"ClusterRoleBinding/crossplane-admin",
			"Service/crossplane-system/crossplane-webhooks",
			"Deployment/crossplane-system/crossplane",
			"Deployment/crossplane-system/crossplane-rbac-manager",
		}
		got := make([]string, 0, len(objs))
		for _, b := range briefs(objs) {
			got = append(got, b.ID)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the objects, in install order: -want, +got:\n%s", diff)
		}
	})

	t.Run("Core", func(t *testing.T) {
		d := typed[appsv1.Deployment](t, objs, "Deployment", "crossplane")
		ps := d.Spec.Template.Spec
		if len(ps.InitContainers) != 1 || len(ps.Containers) != 1 {
			t.Fatalf("core: %d init containers and %d containers, want 1 and 1", len(ps.InitContainers), len(ps.Containers))
		}
		initc, core := ps.InitContainers[0], ps.Containers[0]
		type container struct {
			Image, PullPolicy string
			Args              []string
			Env               map[string]string
			Mounts            map[string]string
			Ports             map[string]int32
			User              int64
			ReadOnlyRoot      bool
		}
		summary := func(c corev1.Container) container {
			s := container{Image: c.Image, PullPolicy: string(c.ImagePullPolicy), Args: c.Args, Env: envOf(c)}
			for _, m := range c.VolumeMounts {
				if s.Mounts == nil {
					s.Mounts = map[string]string{}
				}
				s.Mounts[m.MountPath] = m.Name
			}
			for _, p := range c.Ports {
				if s.Ports == nil {
					s.Ports = map[string]int32{}
				}
				s.Ports[p.Name] = p.ContainerPort
			}
			if sc := c.SecurityContext; sc != nil && sc.RunAsUser != nil && sc.ReadOnlyRootFilesystem != nil {
				s.User, s.ReadOnlyRoot = *sc.RunAsUser, *sc.ReadOnlyRootFilesystem
			}
			return s
		}
		wantInit := container{
			Image: image, PullPolicy: "IfNotPresent",
			// core init installs the CRDs and webhook configurations the
			// image carries (/crds, /webhookconfigurations) and the default
			// activation policy.
			Args: []string{"core", "init", "--activation", "*"},
			Env: map[string]string{
				"GOMAXPROCS": "valueFrom", "GOMEMLIMIT": "valueFrom",
				"POD_NAMESPACE": "fieldRef:metadata.namespace", "POD_SERVICE_ACCOUNT": "fieldRef:spec.serviceAccountName",
				"WEBHOOK_SERVICE_NAME": "crossplane-webhooks", "WEBHOOK_SERVICE_NAMESPACE": "fieldRef:metadata.namespace",
				"WEBHOOK_SERVICE_PORT": "9443",
				"TLS_CA_SECRET_NAME":   "crossplane-root-ca", "TLS_SERVER_SECRET_NAME": "crossplane-tls-server",
				"TLS_CLIENT_SECRET_NAME": "crossplane-tls-client",
			},
			User: 65532, ReadOnlyRoot: true,
		}
		if diff := cmp.Diff(wantInit, summary(initc)); diff != "" {
			t.Errorf("core's init container: -want, +got:\n%s", diff)
		}
		wantCore := container{
			Image: image, PullPolicy: "IfNotPresent",
			Args: []string{"core", "start", "--enable-dependency-version-upgrades", "--poll-interval=15s"},
			Env: map[string]string{
				"GOMAXPROCS": "valueFrom", "GOMEMLIMIT": "valueFrom",
				"POD_NAMESPACE": "fieldRef:metadata.namespace", "POD_SERVICE_ACCOUNT": "fieldRef:spec.serviceAccountName",
				"LEADER_ELECTION": "true",
				// The registry's CA, from ConfigMap registry-ca.
				"CA_BUNDLE_PATH":         "/certs/ca.crt",
				"TLS_SERVER_SECRET_NAME": "crossplane-tls-server", "TLS_SERVER_CERTS_DIR": "/tls/server",
				"TLS_CLIENT_SECRET_NAME": "crossplane-tls-client", "TLS_CLIENT_CERTS_DIR": "/tls/client",
			},
			Mounts: map[string]string{
				"/cache/xpkg": "package-cache", "/cache/xfn": "function-cache", "/certs": "ca-certs",
				"/tls/server": "tls-server-certs", "/tls/client": "tls-client-certs",
			},
			Ports: map[string]int32{"readyz": 8081, "metrics": 8080, "webhooks": 9443},
			User:  65532, ReadOnlyRoot: true,
		}
		if diff := cmp.Diff(wantCore, summary(core)); diff != "" {
			t.Errorf("core's container: -want, +got:\n%s", diff)
		}
		var ca *corev1.Volume
		for i := range ps.Volumes {
			if ps.Volumes[i].Name == "ca-certs" {
				ca = &ps.Volumes[i]
			}
		}
		wantCA := &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "registry-ca"},
			Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
		}
		if ca == nil || cmp.Diff(wantCA, ca.ConfigMap) != "" {
			t.Errorf("core's volume ca-certs: %+v, want ConfigMap %+v", ca, wantCA)
		}
		if ps.ServiceAccountName != "crossplane" {
			t.Errorf("core's ServiceAccount: %q, want crossplane", ps.ServiceAccountName)
		}
		if d.Spec.Template.Annotations["prometheus.io/port"] != "8080" {
			t.Errorf("core's pod annotations %v: want Prometheus scraping on 8080 (metrics.enabled)", d.Spec.Template.Annotations)
		}
	})

	t.Run("RBACManager", func(t *testing.T) {
		d := typed[appsv1.Deployment](t, objs, "Deployment", "crossplane-rbac-manager")
		ps := d.Spec.Template.Spec
		type pod struct {
			ServiceAccount string
			Init, Main     [][]string
		}
		got := pod{ServiceAccount: ps.ServiceAccountName}
		for _, c := range ps.InitContainers {
			got.Init = append(got.Init, append([]string{c.Image}, c.Args...))
		}
		for _, c := range ps.Containers {
			got.Main = append(got.Main, append([]string{c.Image}, c.Args...))
		}
		want := pod{
			ServiceAccount: "rbac-manager",
			Init:           [][]string{{image, "rbac", "init"}},
			Main:           [][]string{{image, "rbac", "start", "--provider-clusterrole=crossplane:allowed-provider-permissions"}},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the RBAC manager's pod: -want, +got:\n%s", diff)
		}
	})

	t.Run("Bindings", func(t *testing.T) {
		for name, sa := range map[string]string{"crossplane": "crossplane", "crossplane-rbac-manager": "rbac-manager"} {
			b := typed[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", name)
			want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: CrossplaneNamespace}}
			if diff := cmp.Diff(want, b.Subjects); diff != "" || b.RoleRef.Name != name {
				t.Errorf("ClusterRoleBinding %s binds ClusterRole %s to -want, +got:\n%s", name, b.RoleRef.Name, diff)
			}
		}
		// The approval step for a provider's extra permissions aggregates
		// into this role.
		r := typed[rbacv1.ClusterRole](t, objs, "ClusterRole", "crossplane:allowed-provider-permissions")
		want := map[string]string{"rbac.crossplane.io/aggregate-to-allowed-provider-permissions": "true"}
		if r.AggregationRule == nil || len(r.AggregationRule.ClusterRoleSelectors) != 1 ||
			cmp.Diff(want, r.AggregationRule.ClusterRoleSelectors[0].MatchLabels) != "" {
			t.Errorf("ClusterRole crossplane:allowed-provider-permissions aggregates %+v, want labels %v", r.AggregationRule, want)
		}
	})

	t.Run("Webhooks", func(t *testing.T) {
		s := typed[corev1.Service](t, objs, "Service", "crossplane-webhooks")
		if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 9443 || s.Spec.Selector["app"] != "crossplane" {
			t.Errorf("Service crossplane-webhooks: ports %+v, selector %v; want 9443 to app=crossplane", s.Spec.Ports, s.Spec.Selector)
		}
	})
}

// TestChartApply installs Crossplane as the harness does into a real
// apiserver, which validates every object, and applies the chart again:
// the second apply changes nothing.
func TestChartApply(t *testing.T) {
	objs, _ := renderOurCrossplane(t)
	dir, version := crossplaneChart(t)
	env := kube.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := crossplaneInstall{
		ChartDir: dir, ValuesFile: CrossplaneValuesFile(), Repository: testCoreRepo, Tag: version,
		RegistryCA: []byte("-----BEGIN CERTIFICATE-----\n"),
	}
	if err := installCrossplane(ctx, env.Client, in); err != nil {
		t.Fatalf("installCrossplane(...): %v", err)
	}
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: CrossplaneNamespace, Name: "registry-ca"}, cm); err != nil {
		t.Fatalf("installCrossplane(...) made no registry CA ConfigMap: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"ca.crt": string(in.RegistryCA)}, cm.Data); diff != "" {
		t.Errorf("ConfigMap registry-ca: -want, +got:\n%s", diff)
	}
	if ok, why, err := crossplaneAvailable(ctx, env.Client); ok || err != nil {
		t.Errorf("crossplaneAvailable(...) with no Deployment controller: %t, %q, %v; want false", ok, why, err)
	}
	versions := map[string]string{}
	for _, o := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Fatalf("%s %s was not applied: %v", o.GetKind(), o.GetName(), err)
		}
		if got.GetAnnotations()[helmReleaseNameAnnotation] != CrossplaneRelease {
			t.Errorf("%s %s has no helm release annotation: %v", o.GetKind(), o.GetName(), got.GetAnnotations())
		}
		versions[o.GetKind()+"/"+o.GetName()] = got.GetResourceVersion()
	}
	// Core init fills the Secrets later; applying again must not undo that
	// (the chart's Secrets have no data, so SSA leaves data alone).
	s := &corev1.Secret{}
	s.SetNamespace(CrossplaneNamespace)
	s.SetName("crossplane-tls-server")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
		t.Fatal(err)
	}
	s.Data = map[string][]byte{"tls.crt": []byte("filled by core init")}
	if err := env.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	versions["Secret/crossplane-tls-server"] = ""
	if err := applyCrossplaneChart(ctx, env.Client, objs); err != nil {
		t.Fatalf("applyCrossplaneChart(...) again: %v", err)
	}
	for _, o := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Fatal(err)
		}
		if v := versions[o.GetKind()+"/"+o.GetName()]; v != "" && v != got.GetResourceVersion() {
			t.Errorf("applying again changed %s %s", o.GetKind(), o.GetName())
		}
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
		t.Fatal(err)
	}
	if string(s.Data["tls.crt"]) != "filled by core init" {
		t.Errorf("applying again emptied Secret %s, which core init fills", s.GetName())
	}
}

// TestChartCoreImage checks the image hack/system-images.sh builds for the
// chart: core init, the chart's init container, installs the CRDs and
// webhook configurations from /crds and /webhookconfigurations (its
// defaults in cmd/crossplane/core/init.go), and both Deployments run the
// image's entrypoint with "core ..." or "rbac ..." arguments. The image is
// built here if it is not cached: seconds, once crossplane-core is built.
func TestChartCoreImage(t *testing.T) {
	testenv.Tool(t, "crossplane-core")
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "system-images.sh"), "build")
	cmd.Stderr = testWriter{t}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/system-images.sh build: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	refs, err := os.ReadFile(filepath.Join(dir, "refs"))
	if err != nil {
		t.Fatal(err)
	}
	var ref string
	for _, l := range strings.Split(string(refs), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "crossplane" {
			ref = f[1]
		}
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatalf("refs names crossplane %q: %v", ref, err)
	}
	img, err := tarball.ImageFromPath(filepath.Join(dir, "crossplane.tar"), &tag)
	if err != nil {
		t.Fatalf("crossplane.tar holds no image %s: %v", ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	type config struct {
		Platform   string
		Entrypoint []string
		User       string
	}
	want := config{Platform: "linux/" + goruntime.GOARCH, Entrypoint: []string{"/usr/local/bin/crossplane"}, User: "65532:65532"}
	got := config{Platform: cf.OS + "/" + cf.Architecture, Entrypoint: cf.Config.Entrypoint, User: cf.Config.User}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("crossplane.tar's config: -want, +got:\n%s", diff)
	}

	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("img.Layers(): %d layers, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close() //nolint:errcheck // Only read.
	files := map[string]bool{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			files["/"+h.Name] = true
		}
	}
	chart, _ := crossplaneChart(t)
	module := filepath.Dir(filepath.Dir(chart)) // cluster/
	var wantFiles []string
	for _, d := range []string{"crds", "webhookconfigurations"} {
		yamls, err := filepath.Glob(filepath.Join(module, d, "*.yaml"))
		if err != nil || len(yamls) == 0 {
			t.Fatalf("the module has no %s/*.yaml: %v", d, err)
		}
		for _, y := range yamls {
			wantFiles = append(wantFiles, "/"+d+"/"+filepath.Base(y))
		}
	}
	wantFiles = append(wantFiles, "/usr/local/bin/crossplane")
	for _, f := range wantFiles {
		if !files[f] {
			t.Errorf("crossplane.tar's layer has no %s", f)
		}
	}
}

// testWriter logs what a command prints to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestChartDeploymentAvailable(t *testing.T) {
	type want struct {
		ok  bool
		why string
	}
	cases := map[string]struct {
		reason string
		d      appsv1.Deployment
		want   want
	}{
		"Available": {
			reason: "A Deployment whose controller saw its spec and says Available is available.",
			d: appsv1.Deployment{Status: appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue},
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue},
			}}},
			want: want{ok: true},
		},
		"NotAvailable": {
			reason: "The Available condition's reason and message say why not.",
			d: appsv1.Deployment{Status: appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable", Message: "0 of 1"},
			}}},
			want: want{why: "not Available: MinimumReplicasUnavailable: 0 of 1"},
		},
		"StaleStatus": {
			reason: "An Available status of an older spec does not count.",
			d: func() appsv1.Deployment {
				d := appsv1.Deployment{Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Conditions: []appsv1.DeploymentCondition{
					{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue},
				}}}
				d.Generation = 2
				return d
			}(),
			want: want{why: "the Deployment controller has not seen the current spec"},
		},
		"NoCondition": {
			reason: "A new Deployment has no condition yet.",
			d:      appsv1.Deployment{Status: appsv1.DeploymentStatus{Replicas: 1}},
			want:   want{why: "no Available condition yet (0 of 1 replicas ready)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ok, why := deploymentAvailable(&tc.d)
			if diff := cmp.Diff(tc.want, want{ok: ok, why: why}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\ndeploymentAvailable(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestChartPushImage pushes an image tarball to a TLS registry under one
// host name and reads it back: the same digest.
func TestChartPushImage(t *testing.T) {
	reg := ociregistry.Start(t, ociregistry.Options{})
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "image.tar")
	tag, _ := name.NewTag("egressproxy.local/crossplane:v1")
	if err := tarball.WriteToFile(file, tag, img); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ref := reg.Host + "/crossplane-system/crossplane:v1"
	digest, err := pushImage(ctx, file, ref, reg.Transport())
	if err != nil {
		t.Fatalf("pushImage(...): %v", err)
	}
	want, _ := img.Digest()
	if digest != want.String() {
		t.Errorf("pushImage(...): digest %s, want %s", digest, want)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Head(r, remote.WithContext(ctx), remote.WithTransport(reg.Transport()))
	if err != nil {
		t.Fatalf("the registry has no %s: %v", ref, err)
	}
	if got.Digest != want {
		t.Errorf("the registry's %s is %s, want %s", ref, got.Digest, want)
	}
	if _, err := pushImage(ctx, filepath.Join(t.TempDir(), "none.tar"), ref, reg.Transport()); err == nil {
		t.Error("pushImage(...) of a missing file succeeded, want an error")
	}
}

// TestChartCoreInit runs what the chart's core init container runs (its
// args and environment, from the rendered Deployment) on the CRDs and
// webhook configurations of the core image's layer, against a real
// apiserver where the chart is installed: it fills the chart's Secrets and
// points the webhooks at the chart's Service.
func TestChartCoreInit(t *testing.T) {
	core := testenv.Tool(t, "crossplane-core")
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "system-images.sh"), "build").Output()
	if err != nil {
		t.Fatalf("hack/system-images.sh build: %v", err)
	}
	root := extractImage(t, filepath.Join(strings.TrimSpace(string(out)), "crossplane.tar"))

	objs, _ := renderOurCrossplane(t)
	dir, version := crossplaneChart(t)
	env := kube.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	in := crossplaneInstall{ChartDir: dir, ValuesFile: CrossplaneValuesFile(), Repository: testCoreRepo, Tag: version}
	if err := installCrossplane(ctx, env.Client, in); err != nil {
		t.Fatalf("installCrossplane(...): %v", err)
	}

	initc := typed[appsv1.Deployment](t, objs, "Deployment", "crossplane").Spec.Template.Spec.InitContainers[0]
	cmdEnv := []string{
		"KUBECONFIG=" + env.Kubeconfig,
		// In the pod these are the image's paths, core init's defaults.
		"CRDS_PATH=" + filepath.Join(root, "crds"),
		"WEBHOOK_CONFIGS_PATH=" + filepath.Join(root, "webhookconfigurations"),
	}
	fields := map[string]string{"metadata.namespace": CrossplaneNamespace, "spec.serviceAccountName": "crossplane"}
	for _, e := range initc.Env {
		switch {
		case e.ValueFrom == nil:
			cmdEnv = append(cmdEnv, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil:
			cmdEnv = append(cmdEnv, e.Name+"="+fields[e.ValueFrom.FieldRef.FieldPath])
		}
	}
	// The first run often meets a stale REST mapper right after it
	// installs the CRDs (coreInit retries likewise); in a pod the kubelet
	// restarts the init container.
	var last []byte
	for i := range 5 {
		cmd := exec.CommandContext(ctx, core, initc.Args...)
		cmd.Env = append(os.Environ(), cmdEnv...)
		if last, err = cmd.CombinedOutput(); err == nil {
			break
		}
		time.Sleep(time.Duration(i+1) * 500 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", core, initc.Args, err, last)
	}

	for _, n := range []string{"crossplane-root-ca", "crossplane-tls-server", "crossplane-tls-client"} {
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: CrossplaneNamespace, Name: n}, s); err != nil {
			t.Fatal(err)
		}
		if len(s.Data["tls.crt"]) == 0 {
			t.Errorf("core init left the chart's Secret %s without tls.crt (%d keys)", n, len(s.Data))
		}
	}
	vwc := &unstructured.Unstructured{}
	vwc.SetAPIVersion("admissionregistration.k8s.io/v1")
	vwc.SetKind("ValidatingWebhookConfiguration")
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "crossplane-no-usages"}, vwc); err != nil {
		t.Fatalf("core init installed no webhook configuration from the image's /webhookconfigurations: %v", err)
	}
	hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
	for _, h := range hooks {
		svc, _, _ := unstructured.NestedMap(h.(map[string]any), "clientConfig", "service")
		want := map[string]any{"name": "crossplane-webhooks", "namespace": CrossplaneNamespace, "port": int64(9443), "path": "/validate-no-usages"}
		if diff := cmp.Diff(want, svc); diff != "" {
			t.Errorf("webhook service: -want, +got:\n%s", diff)
		}
	}
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "providers.pkg.crossplane.io"}, crd); err != nil {
		t.Errorf("core init installed no CRDs from the image's /crds: %v", err)
	}
	mrap := &unstructured.Unstructured{}
	mrap.SetAPIVersion("apiextensions.crossplane.io/v1alpha1")
	mrap.SetKind("ManagedResourceActivationPolicy")
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "default"}, mrap); err != nil {
		t.Errorf("core init made no default activation policy (the chart's --activation *): %v", err)
	}
}

// extractImage writes the files of an image tarball's layers into a new
// folder and returns it.
func extractImage(t *testing.T, file string) string {
	t.Helper()
	img, err := tarball.ImageFromPath(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close() //nolint:errcheck // Only read.
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return root
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, root+string(filepath.Separator)) {
			t.Fatalf("the image holds %s, outside its root", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
}
