/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/runbook"
)

// The page whose commands the docs spec runs.
var gettingStarted = filepath.Join("docs", "getting-started.md")

// A docStep says how the docs spec runs one step (a named sh block) of
// docs/getting-started.md. The spec runs the steps in the page's order,
// each with bash -euo pipefail, the page's variables set to this cluster's
// values (docVariables), the tool cache's kubectl and crossplane on PATH,
// KUBECONFIG set, in a folder of its own holding the repository's
// examples/ (the page's commands run from a checkout).
//
// The suite's cluster is already installed the way the page says (the
// harness applies the same objects from the same files: examples/rbac,
// examples/crossplane/values.yaml, the same registry and CA). So the
// spec runs the page's commands against that state, and they must find it
// as they would leave it: each step is idempotent (kubectl apply, create
// with --dry-run=client | apply), and the objects both the page and the
// harness make must come out unchanged (docObjects), so a page that drifts
// from what the suite tests fails here. What a step makes that the suite
// has not (its Secrets, the example claim) goes again at the end, and the
// node's registry folder is put back as it was.
type docStep struct {
	name string
	// notRun says why the step cannot run against this cluster; it is not
	// run at all.
	notRun string
	// dryRun says why the objects the step's kubectl apply -f - reads are
	// not applied: the spec creates each under another name (docs-NAME)
	// with a server dry run instead, so the API server validates them as
	// new objects, with the CRDs' schemas and rules and its admission, and
	// stores nothing.
	dryRun string
	// stubs replace commands that would reach beyond this machine with a
	// shell function, each with why.
	stubs []docStub
	// files are what the reader has and the step reads (a key): written
	// into the step's folder first.
	files map[string]string
	// check runs after the step, with its output.
	check func(ctx SpecContext, out string)
}

type docStub struct{ command, why, body string }

// docVariableNames are the page's variables, sorted: what differs per
// installation.
var docVariableNames = []string{"CERTS_D", "REGISTRY", "REGISTRY_CA", "REGISTRY_HOST", "VERSION", "XP_NS"}

// docVariables are the values of docVariableNames on this cluster.
func docVariables() map[string]string {
	return map[string]string{
		"REGISTRY_HOST": env.c.RegistryHost,
		"REGISTRY":      env.c.PackageRepo,
		"VERSION":       installedVersion(cluster.Configurations[0].Name),
		"REGISTRY_CA":   env.c.RegistryCAFile(),
		"XP_NS":         cluster.CrossplaneNamespace,
		"CERTS_D":       env.c.Node.RegistryConfigDir(),
	}
}

// installedVersion is the version of the package a Configuration names
// now: the harness installs cluster.PackageVersion, the upgrade specs move
// it on.
func installedVersion(name string) string {
	u := get(context.Background(), Default, gvkConfigPkg, "", name)
	pkg := str(u, "spec", "package")
	return pkg[strings.LastIndex(pkg, ":")+1:]
}

// docSteps are the steps of docs/getting-started.md, in its order.
// TestGettingStartedPlan checks this list against the page.
func docSteps() []docStep {
	return []docStep{
		{name: "variables", notRun: "it sets the page's variables, which the spec sets to this cluster's values instead (docVariables)"},
		{name: "build", notRun: "the suite's bring-up has run it: cluster.Build runs hack/xpkg.sh with this REGISTRY, VERSION and REGISTRY_CA " +
			"(and XPKG_OVERLAY with the test node's squid image, only for the amd64 node); running it again would push the shipped " +
			"Compositions over the tag the cluster installed, and build arm64 too, minutes on 2 cores"},
		{name: "crossplane-ca", check: func(ctx SpecContext, _ string) {
			cm := &corev1.ConfigMap{}
			Expect(env.c.Client.Get(ctx, client.ObjectKey{Namespace: cluster.CrossplaneNamespace, Name: "registry-ca"}, cm)).To(Succeed())
			ca, err := os.ReadFile(env.c.RegistryCAFile())
			Expect(err).NotTo(HaveOccurred())
			Expect(cm.Data).To(HaveKeyWithValue("ca.crt", string(ca)), "the ConfigMap examples/crossplane/values.yaml names holds the registry's CA")
		}},
		{name: "crossplane-helm", notRun: "there is no helm CLI here and charts.crossplane.io is off the test network; the suite installs Crossplane " +
			"from the chart of the same release, with examples/crossplane/values.yaml, through Helm's Go library (internal/testenv/cluster/chart.go), " +
			"and the specs of this suite check what it runs"},
		{
			name:  "node-trust",
			stubs: []docStub{{command: "sudo", why: "the suite runs as root, on the folder of the node's containerd", body: `"$@"`}},
			check: func(ctx SpecContext, _ string) {
				// The harness wrote the same file at start; the page's one
				// now stands, and containerd reads it at the next pull.
				pullThroughNode(ctx, env.c.PackageRepo+"/provider-egressproxy:"+installedVersion(cluster.Configurations[0].Name))
			},
		},
		{name: "rbac"},
		{name: "configuration"},
		{name: "proxy-namespace", check: func(ctx SpecContext, _ string) {
			ns := &corev1.Namespace{}
			Expect(env.c.Client.Get(ctx, client.ObjectKey{Name: cluster.ProxyNamespace}, ns)).To(Succeed())
			Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))
		}},
		{
			name:  "gcp-credentials",
			files: map[string]string{"egress-sa-key.json": `{"type": "service_account", "project_id": "acme-egress", "private_key": "a reader's key"}` + "\n"},
			check: func(ctx SpecContext, _ string) { expectSecretKeys(ctx, "gcp-egress-sa", "credentials.json") },
		},
		{
			name:  "kvm-credentials",
			files: map[string]string{"id_ed25519": "a reader's SSH key\n"},
			stubs: []docStub{{command: "ssh-keyscan", why: "the page's libvirt host kvm1.lab.example is not on the test network (the kvm specs reach the sandbox's libvirt)",
				body: `echo "kvm1.lab.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdocs"`}},
			check: func(ctx SpecContext, _ string) { expectSecretKeys(ctx, "kvm1-ssh", "known_hosts", "ssh-privatekey") },
		},
		{name: "provider-configs", dryRun: "the suite's ClusterProviderConfigs named default reach its own backends (a kubeconfig Secret of this " +
			"cluster, the GCE fake, the sandbox's libvirt), which the other specs use; applied over them, the page's would be merged " +
			"with their fields"},
		{name: "claim", check: func(ctx SpecContext, out string) {
			// kubectl wait saw Ready; the row shows the claim's columns. Its
			// READY is not asserted: once, under load on 2 cores, it read
			// False 7 s after the wait saw True (cause not known yet).
			Expect(out).To(MatchRegexp(`(?m)^web\s+\S+:\d+\s.*\bkubernetes\s+True\s+(True|False)\s+web-egress-proxy\s`), "kubectl get egressproxyclaim")
		}},
		{name: "rotate", check: func(ctx SpecContext, _ string) {
			c := get(ctx, Default, cluster.ClaimGVK(), "team-a", "web")
			Expect(c.GetAnnotations()).To(HaveKey("egressproxy.io/credentials-rotation"))
		}},
		{name: "connection-secret", check: func(_ SpecContext, out string) {
			// examples/composition/credentials-secret.yaml's user.
			Expect(out).To(MatchRegexp(`^http://web:[^@]+@\S+:\d+$`))
		}},
		{name: "use", notRun: "the proxy's address is a ClusterIP inside the node's network namespace and its destinations are on the " +
			"internet, where tests send no traffic; traffic_test.go sends traffic through proxies from a client in that namespace"},
		{name: "namespaced-configuration"},
		{name: "namespaced-get", notRun: "no namespaced XR named web exists here; namespaced_test.go runs crossplane beta trace on its own " +
			"as a member of the team with only examples/rbac/namespaced-xr-user.yaml's rights"},
	}
}

// docObjects are what both the page and the harness make: running the
// page must leave them as they are.
func docObjects() []*unstructured.Unstructured {
	obj := func(gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
		u := cluster.Object(gvk)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	rbac := schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1"}
	out := []*unstructured.Unstructured{
		obj(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, cluster.CrossplaneNamespace, "registry-ca"),
		obj(schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1beta1", Kind: "DeploymentRuntimeConfig"}, "", "provider-egressproxy"),
		obj(schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1beta1", Kind: "ImageConfig"}, "", "provider-egressproxy"),
	}
	for _, role := range []string{cluster.RoleInjectedIdentity, cluster.RoleNamespaces} {
		out = append(out, obj(rbac.GroupVersion().WithKind("ClusterRole"), "", role), obj(rbac.GroupVersion().WithKind("ClusterRoleBinding"), "", role))
	}
	for _, cfg := range cluster.Configurations {
		out = append(out, obj(gvkConfigPkg, "", cfg.Name))
	}
	return out
}

var _ = Describe("docs/getting-started.md", Ordered, Label("docs"), func() {
	BeforeAll(func() {
		skipUnless(cluster.BackendKubernetes)
		if env.c.Node == nil {
			if testenv.InCI() {
				Fail("CI=true but no real node runs here: " + env.c.NoRealNode)
			}
			Skip("no real node here: " + env.c.NoRealNode)
		}
	})

	It("runs as written against the suite's cluster, and leaves what the suite installed as it was", func(ctx SpecContext) {
		steps, err := readGettingStarted()
		Expect(err).NotTo(HaveOccurred())
		plan := map[string]docStep{}
		for _, s := range docSteps() {
			plan[s.name] = s
		}

		// What the suite installed, before.
		before := map[string]map[string]any{}
		for _, u := range docObjects() {
			before[key(u)] = content(ctx, u)
		}

		// The app team's namespace is the platform team's to make, before
		// the page's app team part: the suite's is made here.
		ensureNamespace(ctx, "team-a")
		restoreNode := keepFile(filepath.Join(env.c.Node.RegistryConfigDir(), env.c.RegistryHost, "hosts.toml"))
		DeferCleanup(func(ctx SpecContext) {
			restoreNode()
			_ = os.Remove(filepath.Join(env.c.Node.RegistryConfigDir(), env.c.RegistryHost, "ca.crt"))
			claim := cluster.Object(cluster.ClaimGVK())
			claim.SetNamespace("team-a")
			claim.SetName("web")
			deleteAndWait(ctx, claim)
			for _, s := range []struct{ ns, name string }{
				{"team-a", "web-egress-credentials"}, {cluster.CrossplaneNamespace, "gcp-egress-sa"}, {cluster.CrossplaneNamespace, "kvm1-ssh"},
			} {
				_ = env.c.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.name}})
			}
			// The suite's proxies' namespace had no Pod Security label.
			ns := &corev1.Namespace{}
			if env.c.Client.Get(ctx, client.ObjectKey{Name: cluster.ProxyNamespace}, ns) == nil {
				p := client.MergeFrom(ns.DeepCopy())
				delete(ns.Labels, "pod-security.kubernetes.io/enforce")
				_ = env.c.Client.Patch(ctx, ns, p)
			}
		})

		work, bin := docWorkdir()

		for _, st := range steps {
			how := plan[st.Name]
			if how.notRun != "" {
				GinkgoWriter.Printf("step %-26s not run: %s\n", st.Name, how.notRun)
				continue
			}
			for name, data := range how.files {
				Expect(os.WriteFile(filepath.Join(work, name), []byte(data), 0o600)).To(Succeed())
			}
			t := time.Now()
			out, err := runDocStep(ctx, work, bin, st, how)
			GinkgoWriter.Printf("step %-26s ran in %5.1fs (line %d)%s\n%s", st.Name, time.Since(t).Seconds(), st.Line, dryRunNote(how), indent(out))
			Expect(err).NotTo(HaveOccurred(), "step %s (%s line %d):\n%s", st.Name, gettingStarted, st.Line, out)
			if how.dryRun != "" {
				dryRunCreate(ctx, st, filepath.Join(work, ".dry-run.yaml"))
			}
			if how.check != nil {
				how.check(ctx, out)
			}
		}

		// What the suite installed, after: as it was.
		for _, u := range docObjects() {
			Expect(content(ctx, u)).To(Equal(before[key(u)]), "%s: the page's commands changed what the suite installed", key(u))
		}
		GinkgoWriter.Printf("%d objects the suite installed and the page's commands applied are unchanged\n", len(before))
	})
})

// docs/debugging.md reads the package pods' logs by the names Crossplane
// gives the Provider and the Function it installs as dependencies.
var _ = Describe("docs/debugging.md", Label("docs"), func() {
	It("finds the provider's and the function's pods by their packages", func(ctx SpecContext) {
		b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "debugging.md"))
		Expect(err).NotTo(HaveOccurred())
		steps, err := runbook.Named(b)
		Expect(err).NotTo(HaveOccurred())
		i := slices.IndexFunc(steps, func(s runbook.Step) bool { return s.Name == "package-logs" })
		Expect(i).To(BeNumerically(">=", 0), "docs/debugging.md has no step package-logs")
		st := steps[i]
		// The spec prints what the step found, after it.
		st.Script += "echo \"found: $XP_NS $PROVIDER $FUNCTION\"\n"
		work, bin := docWorkdir()
		out, err := runDocStep(ctx, work, bin, st, docStep{})
		GinkgoWriter.Printf("docs/debugging.md step package-logs (line %d):\n%s", st.Line, indent(out))
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring(fmt.Sprintf("found: %s %s %s\n", cluster.CrossplaneNamespace, cluster.ProviderName, cluster.FunctionName)))
		Expect(out).NotTo(ContainSubstring("No resources found"))
	})
})

// docWorkdir returns a folder to run a page's steps in, holding the
// repository's examples/ as a checkout does, and a folder of the tool
// cache's kubectl and crossplane for PATH.
func docWorkdir() (string, string) {
	work := GinkgoT().TempDir()
	Expect(os.Symlink(filepath.Join(testenv.RepoRoot(), "examples"), filepath.Join(work, "examples"))).To(Succeed())
	bin := filepath.Join(work, ".bin")
	Expect(os.MkdirAll(bin, 0o750)).To(Succeed())
	for name, path := range map[string]string{"kubectl": env.c.Tools.Kubectl, "crossplane": env.c.Tools.Crossplane} {
		Expect(os.Symlink(path, filepath.Join(bin, name))).To(Succeed())
	}
	return work, bin
}

// readGettingStarted returns the steps of the page.
func readGettingStarted() ([]runbook.Step, error) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), gettingStarted))
	if err != nil {
		return nil, err
	}
	return runbook.Parse(b)
}

// runDocStep runs one step with bash in work, and returns its output.
func runDocStep(ctx context.Context, work, bin string, st runbook.Step, how docStep) (string, error) {
	var pre strings.Builder
	pre.WriteString("set -euo pipefail\n")
	vars := docVariables()
	for _, n := range docVariableNames {
		Expect(vars).To(HaveKey(n))
		fmt.Fprintf(&pre, "export %s='%s'\n", n, strings.ReplaceAll(vars[n], "'", `'\''`))
	}
	for _, s := range how.stubs {
		fmt.Fprintf(&pre, "# %s\n%s() { %s; }\n", s.why, s.command, s.body)
	}
	if how.dryRun != "" {
		fmt.Fprintf(&pre, "# %s\nkubectl() { [ \"$*\" = \"apply -f -\" ] || { echo \"want kubectl apply -f -, got kubectl $*\"; return 1; }; cat; echo ---; } >>%s\n",
			how.dryRun, filepath.Join(work, ".dry-run.yaml"))
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", pre.String()+st.Script) //nolint:gosec // The repository's own page.
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "KUBECONFIG="+env.c.Kubeconfig, "HOME="+work)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func dryRunNote(how docStep) string {
	if how.dryRun == "" {
		return ""
	}
	return ", its objects created as docs-NAME with a server dry run: " + how.dryRun
}

// dryRunCreate creates the objects of file, each named docs-NAME, with a
// server dry run, and fails the spec unless the API server accepts each.
func dryRunCreate(ctx context.Context, st runbook.Step, file string) {
	b, err := os.ReadFile(file) //nolint:gosec // The spec's own file.
	Expect(err).NotTo(HaveOccurred())
	objs, err := cluster.Decode(filepath.Base(file), b)
	Expect(err).NotTo(HaveOccurred())
	Expect(objs).NotTo(BeEmpty(), "step %s applies no objects", st.Name)
	for _, o := range objs {
		u := o.DeepCopy()
		u.SetName("docs-" + o.GetName())
		Expect(env.c.Client.Create(ctx, u, client.DryRunAll)).To(Succeed(), "step %s (line %d): %s %s", st.Name, st.Line, o.GetKind(), o.GetName())
		GinkgoWriter.Printf("    %s %s (%s): valid (server dry run)\n", o.GetKind(), o.GetName(), o.GetAPIVersion())
	}
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

// key names an object for messages.
func key(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + strings.TrimPrefix(u.GetNamespace()+"/"+u.GetName(), "/")
}

// content is an object without its metadata and status: what a kubectl
// apply of the same manifest leaves as it is.
func content(ctx context.Context, u *unstructured.Unstructured) map[string]any {
	got, err := env.c.Get(ctx, u.GroupVersionKind(), u.GetNamespace(), u.GetName())
	Expect(err).NotTo(HaveOccurred(), key(u))
	m := got.DeepCopy().Object
	delete(m, "metadata")
	delete(m, "status")
	return m
}

// keepFile returns a function that puts a file back as it is now.
func keepFile(path string) func() {
	b, err := os.ReadFile(path) //nolint:gosec // The node's own file.
	Expect(err).NotTo(HaveOccurred())
	fi, err := os.Stat(path)
	Expect(err).NotTo(HaveOccurred())
	return func() { _ = os.WriteFile(path, b, fi.Mode()) }
}

// expectSecretKeys checks that a Secret in Crossplane's namespace holds
// exactly keys.
func expectSecretKeys(ctx context.Context, name string, keys ...string) {
	s := &corev1.Secret{}
	Expect(env.c.Client.Get(ctx, client.ObjectKey{Namespace: cluster.CrossplaneNamespace, Name: name}, s)).To(Succeed())
	got := make([]string, 0, len(s.Data))
	for k := range s.Data {
		got = append(got, k)
	}
	sort.Strings(got)
	Expect(got).To(Equal(keys), "Secret %s", name)
}

// pullThroughNode runs a pod of image with imagePullPolicy Always: the
// node's containerd pulls it again, trusting the registry as certs.d now
// says. The pod need not run well; the pull must succeed.
func pullThroughNode(ctx context.Context, image string) {
	ns := "docs-e2e"
	ensureNamespace(ctx, ns)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "pull", Image: image, ImagePullPolicy: corev1.PullAlways, Args: []string{"--help"},
		}}},
	}
	// Until the namespace's default ServiceAccount exists, a pod is refused.
	Eventually(ctx, func() error { return client.IgnoreAlreadyExists(env.c.Client.Create(ctx, pod)) }).
		WithTimeout(30 * time.Second).WithPolling(poll).Should(Succeed())
	DeferCleanup(func(ctx SpecContext) { _ = env.c.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)) })
	t := time.Now()
	Eventually(ctx, func(g Gomega) {
		g.Expect(env.c.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.ContainerStatuses).To(HaveLen(1))
		st := pod.Status.ContainerStatuses[0]
		if w := st.State.Waiting; w != nil {
			g.Expect(w.Reason).NotTo(BeElementOf("ErrImagePull", "ImagePullBackOff"), w.Message)
		}
		g.Expect(st.ImageID).NotTo(BeEmpty(), "pulled")
	}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())
	GinkgoWriter.Printf("the node pulled %s (%s) in %s, trusting the registry through the page's hosts.toml\n",
		image, pod.Status.ContainerStatuses[0].ImageID, time.Since(t).Round(100*time.Millisecond))
}

// TestGettingStartedPlan checks, without a cluster, that the docs spec
// decides about every step of docs/getting-started.md, in the page's
// order, that each step it does not run says why, and that the page's
// variables are the ones the spec sets.
func TestGettingStartedPlan(t *testing.T) {
	steps, err := readGettingStarted()
	if err != nil {
		t.Fatalf("%s: %v", gettingStarted, err)
	}
	var page, planned []string
	for _, s := range steps {
		page = append(page, s.Name)
	}
	for _, s := range docSteps() {
		planned = append(planned, s.name)
		if s.notRun != "" && (s.dryRun != "" || s.check != nil || len(s.stubs) > 0) {
			t.Errorf("step %s: not run, so it needs no dry run, check or stubs", s.name)
		}
	}
	if !slices.Equal(page, planned) {
		t.Errorf("the steps of %s are %v; docSteps in test/e2e/docs_test.go plans %v: say there how the docs spec runs each", gettingStarted, page, planned)
	}
	if len(steps) == 0 || steps[0].Name != "variables" {
		t.Fatalf("the first step of %s must be variables", gettingStarted)
	}
	names, _, err := runbook.Variables(steps[0])
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	if !slices.Equal(names, docVariableNames) {
		t.Errorf("%s defines the variables %v; docVariables sets %v", gettingStarted, names, docVariableNames)
	}
}
