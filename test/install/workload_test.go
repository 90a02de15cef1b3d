/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package install

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// The ClusterRoles this project ships for the provider, beside the one
// Crossplane's RBAC manager makes (examples/rbac/provider-egressproxy.yaml).
const (
	roleInjectedIdentity = "provider-egressproxy:kubernetes-injected-identity"
	roleInstance         = "provider-egressproxy:instance"
)

// workloads is the part of the External runtime that runs the packages'
// binaries, as the Deployment runtime's pods would run them: the provider
// of the active ProviderRevision as that revision's ServiceAccount, and the
// function of the active FunctionRevision with the revision's TLS server
// certificate, at the endpoint the harness reports on the revision.
//
// Per ProviderRevision it creates what the Deployment runtime's Post hook
// creates, the ServiceAccount (named after the revision, in
// crossplane-system, controlled by it) and the Deployment (named after the
// revision, naming that ServiceAccount, controlled by it); the Deployment
// has no replicas because the harness runs its process: it is there so that
// Crossplane's RBAC manager, unmodified, binds the revision's system
// ClusterRole to the ServiceAccount, as it does in a cluster. The process
// then gets a token for that ServiceAccount (TokenRequest) and a kubeconfig
// holding only that token. The platform team's part, binding the ClusterRoles
// of examples/rbac to the provider's ServiceAccount, is bindExtraRoles.
type workloads struct {
	owner *testing.T // processes live as long as this test
	p     *plane
	cs    kubernetes.Interface
	dir   string

	mu        sync.Mutex
	endpoints map[string]string // function package → endpoint

	provider, function *proc
	functionPort       int
	providerRev        string
	providerPorts      [2]int // metrics, health
}

func newWorkloads(t *testing.T, p *plane, dir string) *workloads {
	cs, err := kubernetes.NewForConfig(p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &workloads{owner: t, p: p, cs: cs, dir: dir, endpoints: map[string]string{}}
}

// endpoint is externalRuntime's: where the harness serves a function.
func (w *workloads) endpoint(pkg string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.endpoints[pkg]
}

// runFunction (re)starts the function binary bin for the active
// FunctionRevision rev, serving mTLS with the revision's server Secret, and
// reports its endpoint on the revision.
func (w *workloads) runFunction(ctx context.Context, rev *unstructured.Unstructured, bin string) error {
	pkg := rev.GetLabels()[labelPackage]
	var s corev1.Secret
	if err := waitFor(ctx, 60*time.Second, func() error {
		return w.p.kube.Get(ctx, client.ObjectKey{Namespace: xpNamespace, Name: pkg + "-tls-server"}, &s)
	}); err != nil {
		return fmt.Errorf("the runtime hook did not make %s-tls-server: %w", pkg, err)
	}
	// The Deployment runtime mounts the Secret at TLS_SERVER_CERTS_DIR.
	certs := filepath.Join(w.dir, "function-"+rev.GetName()+"-tls")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		return err
	}
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(certs, k), s.Data[k], 0o600); err != nil {
			return err
		}
	}
	if w.function != nil {
		w.function.stop()
	}
	// The same port for every revision, as the Deployment runtime's
	// Service stays the same: a call core has in flight to the old
	// process's endpoint then reaches the new one instead of waiting for
	// an address nothing serves any more.
	if w.functionPort == 0 {
		w.functionPort = freePort(w.owner)
	}
	port := w.functionPort
	env := append(os.Environ(), "TLS_SERVER_CERTS_DIR="+certs)
	f, err := spawn(w.owner, filepath.Join(w.p.logDir, "function-"+rev.GetName()+".log"), env, bin,
		fmt.Sprintf("--address=127.0.0.1:%d", port), "--debug")
	if err != nil {
		return err
	}
	w.function = f
	w.mu.Lock()
	// What the Deployment runtime sets, with the harness's port.
	w.endpoints[pkg] = fmt.Sprintf("dns:///%s.%s:%d", pkg, xpNamespace, port)
	w.mu.Unlock()
	return waitFor(ctx, 60*time.Second, func() error {
		u, err := get(ctx, w.p.kube, gvFunctionRevision, "", rev.GetName())
		if err != nil {
			return err
		}
		if e, _, _ := unstructured.NestedString(u.Object, "status", "endpoint"); e != w.endpoint(pkg) {
			return fmt.Errorf("endpoint %q", e)
		}
		return nil
	})
}

// runProvider (re)starts the provider binary bin for the active
// ProviderRevision rev as the revision's ServiceAccount.
func (w *workloads) runProvider(ctx context.Context, rev *unstructured.Unstructured, bin string) error {
	name := rev.GetName()
	owner := metav1.OwnerReference{APIVersion: rev.GetAPIVersion(), Kind: rev.GetKind(), Name: name,
		UID: rev.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: xpNamespace, Name: name,
		OwnerReferences: []metav1.OwnerReference{owner}}}
	if err := w.p.kube.Create(ctx, sa); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("cannot create ServiceAccount %s: %w", name, err)
	}
	sel := map[string]string{"pkg.crossplane.io/revision": name, "pkg.crossplane.io/provider": rev.GetLabels()[labelPackage]}
	image, _, _ := unstructured.NestedString(rev.Object, "spec", "image")
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: xpNamespace, Name: name, OwnerReferences: []metav1.OwnerReference{owner},
			Annotations: map[string]string{"egressproxy.io/runtime": "the test harness runs this Deployment's process"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{ServiceAccountName: name,
					Containers: []corev1.Container{{Name: "package-runtime", Image: image}}},
			},
		},
	}
	if err := w.p.kube.Create(ctx, d); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("cannot create Deployment %s: %w", name, err)
	}
	// Crossplane's RBAC manager binds crossplane:provider:<revision>:system
	// to the ServiceAccount of the revision's Deployment.
	system := "crossplane:provider:" + name + ":system"
	if err := waitFor(ctx, 60*time.Second, func() error {
		b := &rbacv1.ClusterRoleBinding{}
		if err := w.p.kube.Get(ctx, client.ObjectKey{Name: system}, b); err != nil {
			return err
		}
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == xpNamespace && s.Name == name {
				return nil
			}
		}
		return fmt.Errorf("ClusterRoleBinding %s binds %v", system, b.Subjects)
	}); err != nil {
		return fmt.Errorf("the RBAC manager did not bind %s to ServiceAccount %s: %w", system, name, err)
	}
	kc, err := w.tokenKubeconfig(ctx, name)
	if err != nil {
		return err
	}
	if w.provider != nil {
		// Deactivate: the Deployment runtime deletes the old revision's
		// Deployment; the RBAC manager then unbinds its ServiceAccount.
		w.provider.stop()
		old := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: xpNamespace, Name: w.providerRev}}
		if err := w.p.kube.Delete(ctx, old); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	metrics, health := freePort(w.owner), freePort(w.owner)
	// The environment the Deployment runtime gives the container; a pod's
	// in-cluster config becomes a kubeconfig with the same token. The
	// runtime also mounts the revision's TLS Secrets, which the provider
	// does not read: it serves no webhook (its CRDs have no conversion
	// webhook) and uses no external secret store.
	env := append(os.Environ(), "KUBECONFIG="+kc, "POD_NAMESPACE="+xpNamespace,
		"PROVIDER_NAME="+rev.GetLabels()[labelPackage], "REVISION_NAME="+name, "REVISION_UID="+string(rev.GetUID()))
	pr, err := spawn(w.owner, filepath.Join(w.p.logDir, "provider-"+name+".log"), env, bin,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics), fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", health),
		// What a DeploymentRuntimeConfig would pass: a short poll, so
		// the test sees changes quickly.
		"--poll=10s", "--health-interval=10s", "--debug")
	if err != nil {
		return err
	}
	w.provider, w.providerRev, w.providerPorts = pr, name, [2]int{metrics, health}
	return waitFor(ctx, 60*time.Second, func() error {
		if pr.exited() {
			return fmt.Errorf("the provider exited: %s", lastBytes(filepath.Join(w.p.logDir, "provider-"+name+".log"), 3000))
		}
		rsp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", health)) //nolint:noctx // A loopback probe.
		if err != nil {
			return err
		}
		_ = rsp.Body.Close()
		if rsp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", rsp.Status)
		}
		return nil
	})
}

// tokenKubeconfig writes a kubeconfig holding only a token for the
// ServiceAccount sa: what a pod's projected token gives it.
func (w *workloads) tokenKubeconfig(ctx context.Context, sa string) (string, error) {
	tr, err := w.cs.CoreV1().ServiceAccounts(xpNamespace).CreateToken(ctx, sa,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("cannot request a token for ServiceAccount %s: %w", sa, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: w.p.cfg.Host, CertificateAuthorityData: w.p.cfg.CAData}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts[sa] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: sa}
	kc.CurrentContext = sa
	path := filepath.Join(w.dir, "kubeconfig-"+sa)
	return path, clientcmd.WriteToFile(*kc, path)
}

// whoAmI asks the API server who the kubeconfig authenticates as.
func whoAmI(ctx context.Context, kubeconfig string) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return r.Status.UserInfo.Username, nil
}

// applyExtraRoles applies the ClusterRoles of examples/rbac (not its
// DeploymentRuntimeConfig and bindings, which name a stable ServiceAccount
// the External runtime does not use).
func applyExtraRoles(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "rbac", "provider-egressproxy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, doc := range strings.Split(string(b), "\n---") {
		r := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal([]byte(doc), r); err != nil {
			t.Fatalf("examples/rbac: %v", err)
		}
		if r.Kind != "ClusterRole" {
			continue
		}
		if err := c.Create(ctx, r); client.IgnoreAlreadyExists(err) != nil {
			t.Fatalf("cannot create ClusterRole %s: %v", r.Name, err)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("examples/rbac/provider-egressproxy.yaml: want ClusterRoles %s and %s, got %d ClusterRoles", roleInjectedIdentity, roleInstance, n)
	}
}

// bindExtraRoles binds the ClusterRoles of examples/rbac to the provider's
// ServiceAccounts sas, replacing earlier subjects: the platform team's part.
func bindExtraRoles(ctx context.Context, c client.Client, sas ...string) error {
	for _, r := range []string{roleInjectedIdentity, roleInstance} {
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: r}}
		_, err := controllerutil.CreateOrUpdate(ctx, c, b, func() error {
			b.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r}
			b.Subjects = nil
			for _, sa := range sas {
				b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: xpNamespace, Name: sa})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("cannot bind ClusterRole %s: %w", r, err)
		}
	}
	return nil
}

// lastBytes returns the end of a log.
func lastBytes(file string, n int64) string {
	b, err := os.ReadFile(file) //nolint:gosec // The test's own log.
	if err != nil {
		return err.Error()
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}

// waitFor polls f until it returns nil, and returns its last error after
// timeout.
func waitFor(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}
