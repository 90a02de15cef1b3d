/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package pkgruntime

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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
	RoleInjectedIdentity = "provider-egressproxy:kubernetes-injected-identity"
	RoleNamespaces       = "provider-egressproxy:namespaces"
)

const (
	errFmtTLSSecret   = "the runtime hook did not make %s"
	errFmtSA          = "cannot create ServiceAccount %s"
	errFmtDeployment  = "cannot create Deployment %s"
	errFmtUnbound     = "the RBAC manager did not bind %s to ServiceAccount %s"
	errFmtToken       = "cannot request a token for ServiceAccount %s"
	errFmtExited      = "%s exited (log: %s)"
	errFmtEndpoint    = "the FunctionRevision's endpoint is %q"
	errFmtReadyz      = "readyz: %s"
	errFmtRole        = "cannot create ClusterRole %s"
	errFmtBind        = "cannot bind ClusterRole %s"
	errFmtExtraRoles  = "examples/rbac/provider-egressproxy.yaml: want %d ClusterRoles, got %d"
	errReadExtraRoles = "cannot read examples/rbac/provider-egressproxy.yaml"
	errClientset      = "cannot create a clientset"

	startTimeout = 60 * time.Second
	tokenSeconds = 3600
	// extraRoles is how many ClusterRoles examples/rbac ships.
	extraRoles = 2
)

// A Process is one the harness runs.
type Process interface {
	// Exited is closed when the process has exited.
	Exited() <-chan struct{}
	// Stop ends it as a kubelet ends a container: SIGTERM, then SIGKILL.
	Stop()
	// PID is its process ID.
	PID() int
}

// A Spawner starts bin with args and env added to the harness's
// environment, its output in LogDir/name.log.
type Spawner func(name, bin string, args, env []string) (Process, error)

// Options of a Runtime.
type Options struct {
	// Config and Client reach the control plane as an administrator: the
	// runtime's own identity, never the provider's.
	Config *rest.Config
	Client client.Client
	// Dir holds certificates and kubeconfigs; LogDir is where Spawn logs.
	Dir, LogDir string
	Spawn       Spawner
	// Logf reports what the hooks could not do; nothing when nil.
	Logf func(format string, args ...any)
}

// A Runtime is the External package runtime (see the package doc).
//
// Per ProviderRevision it creates what the Deployment runtime's Post hook
// creates, the ServiceAccount (named after the revision, in
// crossplane-system, controlled by it) and the Deployment (named after the
// revision, naming that ServiceAccount, controlled by it); the Deployment
// has no replicas because the runtime runs its process: it is there so that
// Crossplane's RBAC manager, unmodified, binds the revision's system
// ClusterRole to the ServiceAccount, as it does in a cluster. The process
// then gets a token for that ServiceAccount (TokenRequest) and a kubeconfig
// holding only that token. The platform team's part, binding the
// ClusterRoles of examples/rbac to the provider's ServiceAccount, is
// BindExtraRoles.
type Runtime struct {
	o  Options
	c  client.Client
	cs kubernetes.Interface

	mu        sync.Mutex
	endpoints map[string]string // function package → endpoint

	provider, function Process
	functionPort       int
	providerRev        string
	providerPorts      [2]int // metrics, health
}

// Start starts the runtime hooks, which run until ctx is done.
func Start(ctx context.Context, o Options) (*Runtime, error) {
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, errors.Wrap(err, errClientset)
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	r := &Runtime{o: o, c: o.Client, cs: cs, endpoints: map[string]string{}}
	return r, r.hooks(ctx)
}

func (r *Runtime) logf(format string, args ...any) {
	if r.o.Logf != nil {
		r.o.Logf(format, args...)
	}
}

// Endpoint is where the runtime serves a function package, "" before it
// runs it.
func (r *Runtime) Endpoint(pkg string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.endpoints[pkg]
}

// ProviderRevision is the ProviderRevision whose provider runs, and so the
// name of the ServiceAccount it runs as.
func (r *Runtime) ProviderRevision() string { return r.providerRev }

// ProviderPorts are the loopback ports of the running provider's metrics
// and health probes.
func (r *Runtime) ProviderPorts() (metrics, health int) {
	return r.providerPorts[0], r.providerPorts[1]
}

// Running reports whether the provider and the function it started are
// both still running.
func (r *Runtime) Running() bool {
	return r.provider != nil && r.function != nil && !exited(r.provider) && !exited(r.function)
}

// Kubeconfig is the path of the kubeconfig RunProvider wrote for the
// ServiceAccount sa.
func (r *Runtime) Kubeconfig(sa string) string { return filepath.Join(r.o.Dir, "kubeconfig-"+sa) }

// RunFunction (re)starts the function binary bin for the active
// FunctionRevision rev, serving mTLS with the revision's server Secret, and
// reports its endpoint on the revision.
func (r *Runtime) RunFunction(ctx context.Context, rev *unstructured.Unstructured, bin string, args ...string) error {
	pkg := rev.GetLabels()[LabelPackage]
	var s corev1.Secret
	if err := poll(ctx, startTimeout, func() error {
		return r.c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: pkg + "-tls-server"}, &s)
	}); err != nil {
		return errors.Wrapf(err, errFmtTLSSecret, pkg+"-tls-server")
	}
	// The Deployment runtime mounts the Secret at TLS_SERVER_CERTS_DIR.
	certs := filepath.Join(r.o.Dir, "function-"+rev.GetName()+"-tls")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		return err
	}
	for _, k := range []string{"ca.crt", corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		if err := os.WriteFile(filepath.Join(certs, k), s.Data[k], 0o600); err != nil {
			return err
		}
	}
	if r.function != nil {
		r.function.Stop()
	}
	// The same port for every revision, as the Deployment runtime's
	// Service stays the same: a call core has in flight to the old
	// process's endpoint then reaches the new one instead of waiting for
	// an address nothing serves any more.
	if r.functionPort == 0 {
		p, err := freePort()
		if err != nil {
			return err
		}
		r.functionPort = p
	}
	name := "function-" + rev.GetName()
	f, err := r.o.Spawn(name, bin, append([]string{fmt.Sprintf("--address=127.0.0.1:%d", r.functionPort)}, args...),
		[]string{"TLS_SERVER_CERTS_DIR=" + certs})
	if err != nil {
		return err
	}
	r.function = f
	want := fmt.Sprintf("dns:///%s.%s:%d", pkg, Namespace, r.functionPort)
	r.mu.Lock()
	// What the Deployment runtime sets, with the runtime's port.
	r.endpoints[pkg] = want
	r.mu.Unlock()
	return poll(ctx, startTimeout, func() error {
		if exited(f) {
			return errors.Errorf(errFmtExited, name, filepath.Join(r.o.LogDir, name+".log"))
		}
		u := rev.DeepCopy()
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(rev), u); err != nil {
			return err
		}
		if e, _, _ := unstructured.NestedString(u.Object, statusField, endpointField); e != want {
			return errors.Errorf(errFmtEndpoint, e)
		}
		return nil
	})
}

// RunProvider (re)starts the provider binary bin for the active
// ProviderRevision rev as the revision's ServiceAccount, with args besides
// its metrics and health addresses: what a DeploymentRuntimeConfig would
// give it.
func (r *Runtime) RunProvider(ctx context.Context, rev *unstructured.Unstructured, bin string, args ...string) error {
	name := rev.GetName()
	owner := metav1.OwnerReference{APIVersion: rev.GetAPIVersion(), Kind: rev.GetKind(), Name: name,
		UID: rev.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name,
		OwnerReferences: []metav1.OwnerReference{owner}}}
	if err := r.c.Create(ctx, sa); client.IgnoreAlreadyExists(err) != nil {
		return errors.Wrapf(err, errFmtSA, name)
	}
	sel := map[string]string{"pkg.crossplane.io/revision": name, "pkg.crossplane.io/provider": rev.GetLabels()[LabelPackage]}
	image, _, _ := unstructured.NestedString(rev.Object, "spec", "image")
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name, OwnerReferences: []metav1.OwnerReference{owner},
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
	if err := r.c.Create(ctx, d); client.IgnoreAlreadyExists(err) != nil {
		return errors.Wrapf(err, errFmtDeployment, name)
	}
	// Crossplane's RBAC manager binds crossplane:provider:<revision>:system
	// to the ServiceAccount of the revision's Deployment.
	system := "crossplane:provider:" + name + ":system"
	if err := poll(ctx, startTimeout, func() error {
		b := &rbacv1.ClusterRoleBinding{}
		if err := r.c.Get(ctx, client.ObjectKey{Name: system}, b); err != nil {
			return err
		}
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == Namespace && s.Name == name {
				return nil
			}
		}
		return errors.Errorf("ClusterRoleBinding %s binds %v", system, b.Subjects)
	}); err != nil {
		return errors.Wrapf(err, errFmtUnbound, system, name)
	}
	// The binding takes effect once the apiserver's authorizer has seen it
	// and its ClusterRole: on a loaded machine, a moment later. The
	// provider exits at once if it cannot read its key Secret.
	if err := poll(ctx, startTimeout, func() error {
		sar, err := r.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + Namespace + ":" + name,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + Namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: Namespace, Verb: "get", Resource: "secrets"},
		}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !sar.Status.Allowed {
			return errors.Errorf("not allowed yet: %s", sar.Status.Reason)
		}
		return nil
	}); err != nil {
		return errors.Wrapf(err, errFmtUnbound, system, name)
	}
	kc, err := r.TokenKubeconfig(ctx, name)
	if err != nil {
		return err
	}
	if r.provider != nil {
		// Deactivate: the Deployment runtime deletes the old revision's
		// Deployment; the RBAC manager then unbinds its ServiceAccount.
		r.provider.Stop()
		old := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: r.providerRev}}
		if err := r.c.Delete(ctx, old); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	metrics, err := freePort()
	if err != nil {
		return err
	}
	health, err := freePort()
	if err != nil {
		return err
	}
	// The environment the Deployment runtime gives the container; a pod's
	// in-cluster config becomes a kubeconfig with the same token. The
	// runtime also mounts the revision's TLS Secrets, which the provider
	// does not read: it serves no webhook (its CRDs have no conversion
	// webhook) and uses no external secret store.
	env := []string{"KUBECONFIG=" + kc, "POD_NAMESPACE=" + Namespace,
		"PROVIDER_NAME=" + rev.GetLabels()[LabelPackage], "REVISION_NAME=" + name, "REVISION_UID=" + string(rev.GetUID())}
	proc := "provider-" + name
	pr, err := r.o.Spawn(proc, bin, append([]string{
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics), fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", health),
	}, args...), env)
	if err != nil {
		return err
	}
	r.provider, r.providerRev, r.providerPorts = pr, name, [2]int{metrics, health}
	return poll(ctx, startTimeout, func() error {
		if exited(pr) {
			return errors.Errorf(errFmtExited, proc, filepath.Join(r.o.LogDir, proc+".log"))
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/readyz", health), nil)
		if err != nil {
			return err
		}
		rsp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = rsp.Body.Close()
		if rsp.StatusCode != http.StatusOK {
			return errors.Errorf(errFmtReadyz, rsp.Status)
		}
		return nil
	})
}

// TokenKubeconfig writes a kubeconfig holding only a token for the
// ServiceAccount sa, what a pod's projected token gives it, and returns its
// path (Kubeconfig(sa)).
func (r *Runtime) TokenKubeconfig(ctx context.Context, sa string) (string, error) {
	tr, err := r.cs.CoreV1().ServiceAccounts(Namespace).CreateToken(ctx, sa,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](tokenSeconds)}}, metav1.CreateOptions{})
	if err != nil {
		return "", errors.Wrapf(err, errFmtToken, sa)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["control-plane"] = &clientcmdapi.Cluster{Server: r.o.Config.Host, CertificateAuthorityData: r.o.Config.CAData}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts[sa] = &clientcmdapi.Context{Cluster: "control-plane", AuthInfo: sa}
	kc.CurrentContext = sa
	path := r.Kubeconfig(sa)
	return path, clientcmd.WriteToFile(*kc, path)
}

// WhoAmI asks the API server who a kubeconfig authenticates as.
func WhoAmI(ctx context.Context, kubeconfig string) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	rv, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return rv.Status.UserInfo.Username, nil
}

// ApplyExtraRoles applies the ClusterRoles of examples/rbac (not its
// DeploymentRuntimeConfig and bindings, which name a stable ServiceAccount
// the External runtime does not use).
func ApplyExtraRoles(ctx context.Context, c client.Client) error {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "rbac", "provider-egressproxy.yaml"))
	if err != nil {
		return errors.Wrap(err, errReadExtraRoles)
	}
	n := 0
	for _, doc := range strings.Split(string(b), "\n---") {
		cr := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal([]byte(doc), cr); err != nil {
			return errors.Wrap(err, errReadExtraRoles)
		}
		if cr.Kind != "ClusterRole" {
			continue
		}
		if err := c.Create(ctx, cr); client.IgnoreAlreadyExists(err) != nil {
			return errors.Wrapf(err, errFmtRole, cr.Name)
		}
		n++
	}
	if n != extraRoles {
		return errors.Errorf(errFmtExtraRoles, extraRoles, n)
	}
	return nil
}

// BindExtraRoles binds the ClusterRoles of examples/rbac to the provider's
// ServiceAccounts sas, replacing earlier subjects: the platform team's part.
func BindExtraRoles(ctx context.Context, c client.Client, sas ...string) error {
	for _, role := range []string{RoleInjectedIdentity, RoleNamespaces} {
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role}}
		_, err := controllerutil.CreateOrUpdate(ctx, c, b, func() error {
			b.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
			b.Subjects = nil
			for _, sa := range sas {
				b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: Namespace, Name: sa})
			}
			return nil
		})
		if err != nil {
			return errors.Wrapf(err, errFmtBind, role)
		}
	}
	return nil
}

func exited(p Process) bool {
	select {
	case <-p.Exited():
		return true
	default:
		return false
	}
}

// poll calls f until it returns nil, and returns its last error after
// timeout or when ctx is done.
func poll(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}
