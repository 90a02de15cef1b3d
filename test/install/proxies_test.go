/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package install

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/egressproxy/provider-egressproxy/internal/gcpfake"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/ociregistry"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/pkgruntime"
)

// The claims of examples/composition this test creates, and what they
// compose.
const (
	appNamespace   = "team-a"
	proxyNamespace = "egress-proxies" // the kubernetes Composition's namespace
	claimK8s       = "web"            // claim-kubernetes.yaml
	claimGCP       = "partner-api"    // claim-gcp.yaml
	gcpProject     = "egressproxy-install"
	gcpKeySecret   = "gcp-fake-key"

	upgradeVersion = "v0.2.0"
	brokenVersion  = "v0.3.0"
	// printerColumn is v0.2.0's change: a printer column on KubernetesProxy.
	printerColumn = pkgruntime.UpgradePrinterColumn
)

var (
	gvClaim      = schema.GroupVersionKind{Group: "egressproxy.io", Version: "v1alpha1", Kind: "EgressProxyClaim"}
	gvXR         = schema.GroupVersionKind{Group: "egressproxy.io", Version: "v1alpha1", Kind: "XEgressProxy"}
	gvK8sProxy   = schema.GroupVersionKind{Group: "kubernetes.m.egressproxy.io", Version: "v1alpha1", Kind: "KubernetesProxy"}
	gvGCPProxy   = schema.GroupVersionKind{Group: "gcp.m.egressproxy.io", Version: "v1alpha1", Kind: "GCPProxy"}
	gvK8sCluster = schema.GroupVersionKind{Group: "kubernetes.m.egressproxy.io", Version: "v1alpha1", Kind: "ClusterProviderConfig"}
	gvGCPCluster = schema.GroupVersionKind{Group: "gcp.m.egressproxy.io", Version: "v1alpha1", Kind: "ClusterProviderConfig"}

	// forbidden is how the Kubernetes backend names a missing permission.
	forbidden = regexp.MustCompile(`may not (get|list|create|update|patch|delete) ([a-z]+(\.[a-z.]+)?)`)
)

// buildUpgrades builds and pushes v0.2.0, the tree's packages with one real
// change laid over them (a printer column on KubernetesProxy), and v0.3.0,
// a Configuration that needs a Crossplane that does not exist.
func buildUpgrades(ctx context.Context, cli string, reg *ociregistry.Registry, repo, dir string) error {
	root := testenv.RepoRoot()
	up := filepath.Join(dir, "overlay-"+upgradeVersion)
	if err := pkgruntime.WriteUpgradeOverlay(up); err != nil {
		return err
	}
	if err := buildAndPush(ctx, cli, reg, repo, upgradeVersion, filepath.Join(dir, "out-"+upgradeVersion), up); err != nil {
		return fmt.Errorf("%s: %w", upgradeVersion, err)
	}

	meta, err := os.ReadFile(filepath.Join(root, "package", "configuration", "crossplane.yaml")) //nolint:gosec // A file of this repository.
	if err != nil {
		return err
	}
	bad := regexp.MustCompile(`(?m)^(\s+crossplane:\s*\n\s+version:\s*).*$`).ReplaceAllString(string(meta), `${1}">=v99.0.0"`)
	if bad == string(meta) {
		return fmt.Errorf("cannot find spec.crossplane.version in package/configuration/crossplane.yaml")
	}
	broken := filepath.Join(dir, "overlay-"+brokenVersion)
	if err := os.MkdirAll(filepath.Join(broken, "configuration"), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(broken, "configuration", "crossplane.yaml"), []byte(bad), 0o600); err != nil {
		return err
	}
	if err := buildAndPush(ctx, cli, reg, repo, brokenVersion, filepath.Join(dir, "out-"+brokenVersion), broken, "configuration"); err != nil {
		return fmt.Errorf("%s: %w", brokenVersion, err)
	}
	return nil
}

// binDir is where hack/xpkg.sh put the binaries it packaged.
func binDir(dir, v string) string {
	if v == version {
		return filepath.Join(dir, "out", "bin", "linux_amd64")
	}
	return filepath.Join(dir, "out-"+v, "bin", "linux_amd64")
}

// runActive makes the harness run the active Provider and Function
// revisions of the packages at version v.
func runActive(ctx context.Context, t *testing.T, w *workloads, dir, v string, oldSA string) {
	t.Helper()
	prev := waitActive(ctx, t, w.p.kube, gvProviderRevision, providerName, v)
	sas := []string{prev.GetName()}
	if oldSA != "" && oldSA != prev.GetName() {
		// Both, while the old process still runs.
		sas = append(sas, oldSA)
	}
	if err := pkgruntime.BindExtraRoles(ctx, w.p.kube, sas...); err != nil {
		t.Fatal(err)
	}
	if err := w.RunProvider(ctx, prev, filepath.Join(binDir(dir, v), "provider"),
		// What a DeploymentRuntimeConfig would pass: a short poll, so the
		// test sees changes quickly.
		"--poll=10s", "--health-interval=10s", "--debug"); err != nil {
		t.Fatalf("cannot run the provider of %s: %v", prev.GetName(), err)
	}
	if err := pkgruntime.BindExtraRoles(ctx, w.p.kube, prev.GetName()); err != nil {
		t.Fatal(err)
	}
	frev := waitActive(ctx, t, w.p.kube, gvFunctionRevision, functionName, v)
	if err := w.RunFunction(ctx, frev, filepath.Join(binDir(dir, v), "function"), "--debug"); err != nil {
		t.Fatalf("cannot run the function of %s: %v", frev.GetName(), err)
	}
	t.Logf("the harness runs the provider of %s as ServiceAccount %s/%s and the function of %s at %s",
		prev.GetName(), xpNamespace, prev.GetName(), frev.GetName(), w.Endpoint(functionName))
}

// waitActive waits for the package's active revision of version v to be
// healthy, and returns it.
func waitActive(ctx context.Context, t *testing.T, c client.Client, gvk schema.GroupVersionKind, pkg, v string) *unstructured.Unstructured {
	t.Helper()
	var out *unstructured.Unstructured
	eventually(t, 3*time.Minute, fmt.Sprintf("an active, healthy %s of %s at %s", gvk.Kind, pkg, v), func() (bool, string) {
		revs, err := list(ctx, c, gvk, client.MatchingLabels{labelPackage: pkg})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for i := range revs {
			r := &revs[i]
			s, _, _ := unstructured.NestedString(r.Object, "spec", "desiredState")
			img, _, _ := unstructured.NestedString(r.Object, "spec", "image")
			seen = append(seen, fmt.Sprintf("%s %s %s: %s", r.GetName(), s, img, conditions(r)))
			if s == "Active" && strings.HasSuffix(img, ":"+v) && revisionHealthy(r) {
				out = r
				return true, ""
			}
		}
		return false, strings.Join(seen, "; ")
	})
	return out
}

// createProxies creates the provider configs of the kubernetes and gcp
// backends and one example claim on each.
func createProxies(ctx context.Context, t *testing.T, c client.Client, fake *gcpfake.Server) {
	t.Helper()
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNamespace}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: proxyNamespace}},
	}
	key, err := fake.NewServiceAccountKey("provider@" + gcpProject + ".iam.gserviceaccount.com")
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: xpNamespace, Name: gcpKeySecret},
		Data: map[string][]byte{"credentials.json": key}})
	k8s := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "default"},
		"spec": map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}, "allowedNamespaces": []any{proxyNamespace}}}}
	k8s.SetGroupVersionKind(gvK8sCluster)
	gcp := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "default"},
		"spec": map[string]any{"projectID": gcpProject, "endpoint": fake.URL(),
			"credentials": map[string]any{"source": "Secret",
				"secretRef": map[string]any{"namespace": xpNamespace, "name": gcpKeySecret, "key": "credentials.json"}}}}}
	gcp.SetGroupVersionKind(gvGCPCluster)
	objs = append(objs, k8s, gcp)
	for _, f := range []string{"credentials-secret.yaml", "claim-kubernetes.yaml", "claim-gcp.yaml"} {
		objs = append(objs, example(t, f))
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			t.Fatalf("cannot create %T %s: %v", o, o.GetName(), err)
		}
	}
}

func example(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "composition", file)) //nolint:gosec // A file of this repository.
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// proxiesHealthy reports whether the claims are as far as this cluster lets
// them get: the gcp claim Ready and Synced; the kubernetes claim and its
// KubernetesProxy Synced, its Deployment created (no kubelet runs its pods,
// so it is never Ready here).
func proxiesHealthy(ctx context.Context, c client.Client) (bool, string) {
	var bad []string
	for _, tc := range []struct {
		claim string
		ready bool
	}{{claimGCP, true}, {claimK8s, false}} {
		u, err := get(ctx, c, gvClaim, appNamespace, tc.claim)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		s, _ := condition(u, "Synced")
		r, _ := condition(u, "Ready")
		if s != "True" || (tc.ready && r != "True") {
			bad = append(bad, "claim "+tc.claim+": "+conditions(u))
		}
	}
	for _, gvk := range []schema.GroupVersionKind{gvK8sProxy, gvGCPProxy} {
		mrs, err := list(ctx, c, gvk, client.InNamespace(appNamespace))
		if err != nil || len(mrs) != 1 {
			bad = append(bad, fmt.Sprintf("%s in %s: %d (%v)", gvk.Kind, appNamespace, len(mrs), err))
			continue
		}
		if s, _ := condition(&mrs[0], "Synced"); s != "True" {
			bad = append(bad, gvk.Kind+" "+mrs[0].GetName()+": "+conditions(&mrs[0]))
		}
	}
	deps := &appsv1.DeploymentList{}
	if err := c.List(ctx, deps, client.InNamespace(proxyNamespace)); err != nil || len(deps.Items) != 1 {
		bad = append(bad, fmt.Sprintf("Deployments in %s: %d (%v)", proxyNamespace, len(deps.Items), err))
	}
	return len(bad) == 0, strings.Join(bad, "; ")
}

// world identifies every backend instance and what the claims produced: a
// changed UID, instance ID or creation time means deleted and recreated; a
// changed digest means a connection Secret was rewritten.
func world(ctx context.Context, t *testing.T, c client.Client, fake *gcpfake.Server) []string {
	t.Helper()
	var out []string
	for _, inst := range fake.Instances() {
		out = append(out, fmt.Sprintf("GCE instance %s id=%d created=%s status=%s", inst.GetName(), inst.GetId(),
			inst.GetCreationTimestamp(), inst.GetStatus()))
	}
	for _, l := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{},
		&corev1.SecretList{}, &policyv1.PodDisruptionBudgetList{}} {
		if err := c.List(ctx, l, client.InNamespace(proxyNamespace)); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			o := it.(client.Object) //nolint:forcetypeassert // Typed API objects.
			out = append(out, fmt.Sprintf("%T %s/%s uid=%s created=%s", o, o.GetNamespace(), o.GetName(), o.GetUID(),
				o.GetCreationTimestamp().UTC().Format(time.RFC3339)))
		}
	}
	for _, gvk := range []schema.GroupVersionKind{gvClaim, gvXR, gvK8sProxy, gvGCPProxy} {
		items, err := list(ctx, c, gvk)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range items {
			out = append(out, fmt.Sprintf("%s %s/%s uid=%s", gvk.Kind, u.GetNamespace(), u.GetName(), u.GetUID()))
			if gvk == gvClaim {
				ref, _, _ := unstructured.NestedString(u.Object, "spec", "writeConnectionSecretToRef", "name")
				s := &corev1.Secret{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: u.GetNamespace(), Name: ref}, s); err != nil {
					out = append(out, fmt.Sprintf("connection Secret %s/%s: %v", u.GetNamespace(), ref, err))
					continue
				}
				out = append(out, fmt.Sprintf("connection Secret %s/%s uid=%s keys=%d data=%x", s.Namespace, s.Name, s.UID,
					len(s.Data), digest(s.Data)))
			}
		}
	}
	sort.Strings(out)
	return out
}

func digest(data map[string][]byte) []byte {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%x;", k, data[k])
	}
	return h.Sum(nil)[:8]
}

// watch records every moment proxiesHealthy does not hold, until stop.
type watch struct {
	mu     sync.Mutex
	breaks []string
	stop   chan struct{}
	done   chan struct{}
}

func watchProxies(ctx context.Context, c client.Client) *watch {
	w := &watch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			if ok, msg := proxiesHealthy(ctx, c); !ok {
				w.mu.Lock()
				w.breaks = append(w.breaks, time.Now().UTC().Format("15:04:05.0")+" "+msg)
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return w
}

func (w *watch) end() []string {
	close(w.stop)
	<-w.done
	return w.breaks
}

// auditUsers returns, from the API server's audit log, the users the
// provider binary's requests were made as (its clients' user agents start
// with "provider/" or name provider-egressproxy), with counts, and what each
// user did ("verb resource").
func auditUsers(t *testing.T, file string) (map[string]int, map[string][]string) {
	t.Helper()
	f, err := os.Open(file) //nolint:gosec // The test's own log.
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() //nolint:errcheck // Read only.
	users, did := map[string]int{}, map[string][]string{}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<22)
	for s.Scan() {
		var e struct {
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			User      struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
		}
		if json.Unmarshal(s.Bytes(), &e) != nil {
			continue
		}
		if strings.HasPrefix(e.UserAgent, "provider/") || strings.Contains(e.UserAgent, "provider-egressproxy") {
			users[e.User.Username]++
		}
		r := e.Verb + " " + e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			r += "/" + e.ObjectRef.Subresource
		}
		if !contains(did[e.User.Username], r) {
			did[e.User.Username] = append(did[e.User.Username], r)
		}
	}
	return users, did
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// assertProviderIdentity checks that the provider authenticates as the
// ServiceAccount of its revision: its kubeconfig says so, and every request
// the audit log holds from the provider binary was made as one of sas.
func assertProviderIdentity(ctx context.Context, t *testing.T, w *workloads, sas ...string) {
	t.Helper()
	want := "system:serviceaccount:" + xpNamespace + ":" + w.ProviderRevision()
	who, err := pkgruntime.WhoAmI(ctx, w.Kubeconfig(w.ProviderRevision()))
	if err != nil || who != want {
		t.Errorf("the provider's kubeconfig authenticates as %q (%v), want %q", who, err, want)
	}
	// Its rights: exactly the RBAC manager's system role of its revision
	// and the ClusterRole of examples/rbac.
	crbs := &rbacv1.ClusterRoleBindingList{}
	rbs := &rbacv1.RoleBindingList{}
	if err := w.p.kube.List(ctx, crbs); err != nil {
		t.Fatal(err)
	}
	if err := w.p.kube.List(ctx, rbs); err != nil {
		t.Fatal(err)
	}
	var roles []string
	bound := func(subjects []rbacv1.Subject, ref rbacv1.RoleRef, where string) {
		for _, s := range subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == xpNamespace && s.Name == w.ProviderRevision() {
				roles = append(roles, where+ref.Kind+" "+ref.Name)
			}
		}
	}
	for _, b := range crbs.Items {
		bound(b.Subjects, b.RoleRef, "")
	}
	for _, b := range rbs.Items {
		bound(b.Subjects, b.RoleRef, b.Namespace+": ")
	}
	sort.Strings(roles)
	wantRoles := []string{"ClusterRole crossplane:provider:" + w.ProviderRevision() + ":system", "ClusterRole " + roleInjectedIdentity, "ClusterRole " + pkgruntime.RoleNamespaces}
	sort.Strings(wantRoles)
	if diff := cmp.Diff(wantRoles, roles); diff != "" {
		t.Errorf("roles bound to the provider's ServiceAccount: -want, +got:\n%s", diff)
	}
	users, did := auditUsers(t, w.p.auditLog)
	allowed := map[string]bool{}
	for _, sa := range sas {
		allowed["system:serviceaccount:"+xpNamespace+":"+sa] = true
	}
	for u, n := range users {
		if !allowed[u] {
			t.Errorf("the provider made %d requests as %q, not as its ServiceAccount", n, u)
		}
	}
	// Its controllers watch the managed resources; the Kubernetes backend
	// with InjectedIdentity watches the proxies' Deployments (its watch cache
	// serves its reads, so a GET happens only before the cache has synced).
	for _, r := range []string{"watch gcpproxies", "watch kubernetesproxies", "watch deployments"} {
		if !contains(did[want], r) {
			t.Errorf("the audit log holds no %q by %s: requests %v, %v", r, want, users, did[want])
		}
	}
	t.Logf("audit log: the provider binary's requests by user %v; %s did %v", users, want, did[want])
}

// assertMissingPermission takes the InjectedIdentity ClusterRole from the
// provider and asks for a new Kubernetes proxy: its KubernetesProxy must
// name the verb and resource the provider may not use. (The existing proxy
// would not notice soon: the backend reads through informers whose watches
// outlive the binding; a new proxy must write.) Then it gives the role back:
// the new proxy gets made, and is deleted again.
func assertMissingPermission(ctx context.Context, t *testing.T, w *workloads) {
	c := w.p.kube
	if err := c.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: roleInjectedIdentity}}); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}
	if err := c.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	mr := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"namespace": ns.Name, "name": "rbac-check"},
		"spec": map[string]any{
			"forProvider": map[string]any{"namespace": proxyNamespace, "allowedClientCIDRs": []any{"10.0.0.0/8"},
				"allowedDestinations": []any{"api.stripe.com"}},
			"providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": "default"},
		},
	}}
	mr.SetGroupVersionKind(gvK8sProxy)
	if err := c.Create(ctx, mr); err != nil {
		t.Fatal(err)
	}
	var seen string
	eventually(t, 90*time.Second, "the KubernetesProxy to name the permission it lacks", func() (bool, string) {
		u, err := get(ctx, c, gvK8sProxy, ns.Name, mr.GetName())
		if err != nil {
			return false, err.Error()
		}
		s, msg := condition(u, "Synced")
		if s == "False" && forbidden.MatchString(msg) {
			seen = msg
			return true, ""
		}
		return false, conditions(u)
	})
	t.Logf("without %s: KubernetesProxy Synced=False %s", roleInjectedIdentity, seen)
	if err := pkgruntime.BindExtraRoles(ctx, c, w.ProviderRevision()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the KubernetesProxy to be made once the ClusterRole is bound again", func() (bool, string) {
		u, err := get(ctx, c, gvK8sProxy, ns.Name, mr.GetName())
		if err != nil {
			return false, err.Error()
		}
		s, _ := condition(u, "Synced")
		return s == "True", conditions(u)
	})
	if err := c.Delete(ctx, mr); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the provider to delete the KubernetesProxy and its parts", func() (bool, string) {
		if _, err := get(ctx, c, gvK8sProxy, ns.Name, mr.GetName()); err == nil {
			return false, "KubernetesProxy still there"
		}
		return proxiesHealthy(ctx, c)
	})
}

// assertUpgrade publishes nothing (buildUpgrades did) and moves the
// Configuration to v0.2.0: Crossplane rolls the Provider and Function
// revisions, the harness runs the new ones, and no proxy may notice.
func assertUpgrade(ctx context.Context, t *testing.T, w *workloads, fake *gcpfake.Server, dir string) {
	c := w.p.kube
	before := world(ctx, t, c, fake)
	oldProvider, oldFunction := w.ProviderRevision(), activeRevision(ctx, t, c, gvFunctionRevision, functionName)
	watching := watchProxies(ctx, c)
	start := time.Now()
	setPackage(ctx, t, c, upgradeVersion)
	runActive(ctx, t, w, dir, upgradeVersion, oldProvider)
	waitActive(ctx, t, c, gvConfigurationRevision, configuration, upgradeVersion)
	t.Logf("UPGRADE TIME: Configuration %s → %s: Configuration, Provider and Function revisions rolled and healthy, "+
		"the new provider and function running, in %s", version, upgradeVersion, time.Since(start).Round(100*time.Millisecond))
	if w.ProviderRevision() == oldProvider {
		t.Errorf("the ProviderRevision did not roll: still %s", oldProvider)
	}
	if f := activeRevision(ctx, t, c, gvFunctionRevision, functionName); f == oldFunction {
		t.Errorf("the FunctionRevision did not roll: still %s", oldFunction)
	}
	// v0.2.0's change is in the cluster.
	eventually(t, 60*time.Second, "the KubernetesProxy CRD to have v0.2.0's printer column", func() (bool, string) {
		crd, err := get(ctx, c, gvCRD, "", "kubernetesproxies.kubernetes.m.egressproxy.io")
		if err != nil {
			return false, err.Error()
		}
		b, _ := json.Marshal(crd.Object["spec"])
		return strings.Contains(string(b), printerColumn), "no column " + printerColumn
	})
	// A few polls of the new provider over the existing proxies, then a
	// change that must go through the new function and provider.
	time.Sleep(25 * time.Second)
	claimChangeFlows(ctx, t, c, "upgrade.stripe.com")
	eventually(t, 60*time.Second, "the proxies after the upgrade", func() (bool, string) { return proxiesHealthy(ctx, c) })
	if b := watching.end(); len(b) > 0 {
		t.Errorf("a proxy was not Ready/Synced during the upgrade:\n%s", strings.Join(b, "\n"))
	}
	if diff := cmp.Diff(before, world(ctx, t, c, fake)); diff != "" {
		t.Errorf("the upgrade deleted, recreated or rewrote backend instances or connection Secrets: -before, +after:\n%s", diff)
	}
	assertProviderIdentity(ctx, t, w, oldProvider, w.ProviderRevision())
}

// assertBrokenVersion moves the Configuration to v0.3.0, which needs a
// Crossplane that does not exist: Crossplane must say so on the package,
// and the running revisions must keep serving the claims.
func assertBrokenVersion(ctx context.Context, t *testing.T, w *workloads, fake *gcpfake.Server) {
	c := w.p.kube
	before := world(ctx, t, c, fake)
	prov, fn := w.ProviderRevision(), activeRevision(ctx, t, c, gvFunctionRevision, functionName)
	watching := watchProxies(ctx, c)
	setPackage(ctx, t, c, brokenVersion)
	var seen string
	eventually(t, 90*time.Second, "a condition on the Configuration naming the incompatible Crossplane version", func() (bool, string) {
		u, err := get(ctx, c, gvConfiguration, "", configuration)
		if err != nil {
			return false, err.Error()
		}
		for _, typ := range []string{"Healthy", "Installed"} {
			if s, msg := condition(u, typ); s == "False" && strings.Contains(msg, "incompatible Crossplane version") {
				seen = typ + "=False " + msg
				return true, ""
			}
		}
		return false, conditions(u)
	})
	t.Logf("Configuration %s at %s: %s", configuration, brokenVersion, seen)
	// The running revisions keep serving: a change to a claim still goes
	// through the function and the provider to the backend.
	claimChangeFlows(ctx, t, c, "broken.stripe.com")
	// A poll or two of core and the provider with the broken revision.
	time.Sleep(15 * time.Second)
	eventually(t, 60*time.Second, "the proxies", func() (bool, string) { return proxiesHealthy(ctx, c) })
	if b := watching.end(); len(b) > 0 {
		t.Errorf("a proxy was not Ready/Synced after the broken version was applied:\n%s", strings.Join(b, "\n"))
	}
	if got := activeRevision(ctx, t, c, gvProviderRevision, providerName); got != prov {
		t.Errorf("active ProviderRevision: want %s, got %s", prov, got)
	}
	if got := activeRevision(ctx, t, c, gvFunctionRevision, functionName); got != fn {
		t.Errorf("active FunctionRevision: want %s, got %s", fn, got)
	}
	if !w.Running() {
		t.Errorf("the provider or the function exited")
	}
	// The changed claim's objects are updated in place: no identity
	// changes, and a destination is no connection detail.
	if diff := cmp.Diff(before, world(ctx, t, c, fake)); diff != "" {
		t.Errorf("the broken version deleted, recreated or rewrote backend instances or connection Secrets: -before, +after:\n%s", diff)
	}
}

// claimChangeFlows adds a destination to the kubernetes claim and waits for
// it to reach its KubernetesProxy: core composes with the installed function
// and the provider takes the change.
func claimChangeFlows(ctx context.Context, t *testing.T, c client.Client, dest string) {
	t.Helper()
	claim, err := get(ctx, c, gvClaim, appNamespace, claimK8s)
	if err != nil {
		t.Fatal(err)
	}
	d, _, _ := unstructured.NestedStringSlice(claim.Object, "spec", "allowedDestinations")
	b, _ := json.Marshal(map[string]any{"spec": map[string]any{"allowedDestinations": append(d, dest)}})
	if err := c.Patch(ctx, claim, client.RawPatch(types.MergePatchType, b)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the claim's change to reach the KubernetesProxy", func() (bool, string) {
		mrs, err := list(ctx, c, gvK8sProxy, client.InNamespace(appNamespace))
		if err != nil || len(mrs) != 1 {
			return false, fmt.Sprintf("%d (%v)", len(mrs), err)
		}
		d, _, _ := unstructured.NestedStringSlice(mrs[0].Object, "spec", "forProvider", "allowedDestinations")
		s, _ := condition(&mrs[0], "Synced")
		xrs, _ := list(ctx, c, gvXR)
		var xr []string
		for i := range xrs {
			xd, _, _ := unstructured.NestedStringSlice(xrs[i].Object, "spec", "allowedDestinations")
			xr = append(xr, fmt.Sprintf("XR %s %v %s", xrs[i].GetName(), xd, conditions(&xrs[i])))
		}
		return contains(d, dest) && s == "True", fmt.Sprintf("allowedDestinations %v, %s; %s", d, conditions(&mrs[0]), strings.Join(xr, "; "))
	})
}

// setPackage points the Configuration at version v of its package.
func setPackage(ctx context.Context, t *testing.T, c client.Client, v string) {
	t.Helper()
	u, err := get(ctx, c, gvConfiguration, "", configuration)
	if err != nil {
		t.Fatal(err)
	}
	pkg, _, _ := unstructured.NestedString(u.Object, "spec", "package")
	pkg = pkg[:strings.LastIndex(pkg, ":")+1] + v
	b, _ := json.Marshal(map[string]any{"spec": map[string]any{"package": pkg}})
	if err := c.Patch(ctx, u, client.RawPatch(types.MergePatchType, b)); err != nil {
		t.Fatalf("cannot point the Configuration at %s: %v", pkg, err)
	}
}
