/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	gcpv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/controller/config"
	"github.com/egressproxy/provider-egressproxy/internal/controller/gcpproxy"
	"github.com/egressproxy/provider-egressproxy/internal/controller/kubernetesproxy"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// call is one backend call a recorder saw.
type call struct {
	op, namespace, name string
	creds               backend.Credentials
	// secret is the provider config's credential the backend was built
	// with.
	secret string
}

// recorder is an in-memory backend of any kind that records every call,
// and what each call was made with.
type recorder[P, O any] struct {
	mu        sync.Mutex
	instances map[string]backend.Desired[P]
	calls     []call
	// stale makes Observe report every instance out of date.
	stale bool
}

func newRecorder[P, O any]() *recorder[P, O] {
	return &recorder[P, O]{instances: map[string]backend.Desired[P]{}}
}

func (r *recorder[P, O]) record(op, secret string, d backend.Desired[P]) {
	r.calls = append(r.calls, call{op: op, namespace: d.Ownership.Owner.Namespace, name: d.Name, creds: d.Credentials, secret: secret})
}

// backend returns the recorder as a backend built with the config's
// credential secret.
func (r *recorder[P, O]) backend(secret string) backend.Fns[P, O] {
	write := func(op string, keep bool) func(context.Context, backend.Desired[P]) error {
		return func(_ context.Context, d backend.Desired[P]) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.record(op, secret, d)
			if keep {
				r.instances[d.Name] = d
			} else {
				delete(r.instances, d.Name)
			}
			return nil
		}
	}
	return backend.Fns[P, O]{
		ObserveFn: func(_ context.Context, d backend.Desired[P]) (backend.Observation[O], error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.record("observe", secret, d)
			got, ok := r.instances[d.Name]
			if !ok {
				return backend.Observation[O]{}, backend.NotFound(errors.New("no such instance"))
			}
			return backend.Observation[O]{
				ID: backend.FormatID("memory", d.Name), State: commonv1alpha1.StateRunning, Ready: true,
				Endpoint: "egress.example:3128", Ownership: got.Ownership,
				UpToDate: !r.stale && got.Credentials == d.Credentials && reflect.DeepEqual(got.Proxy, d.Proxy),
			}, nil
		},
		CreateFn: write("create", true),
		UpdateFn: write("update", true),
		DeleteFn: write("delete", false),
	}
}

// writes returns the calls that change the backend, for resources of
// namespace ns: the managers of the tests in this package all see every
// namespace of the shared API server.
func (r *recorder[P, O]) writes(ns string) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var w []call
	for _, c := range r.calls {
		if c.op != "observe" && c.namespace == ns {
			w = append(w, c)
		}
	}
	return w
}

// kubernetesFactory builds r for a kubernetes provider config, reading its
// kubeconfig Secret as the real factory does: a config or Secret that is
// gone fails the connection.
func kubernetesFactory(r *recorder[params, obs]) kubernetesproxy.BackendFactory {
	return func(ctx context.Context, kube client.Client, cfg proxy.Config) (backend.Backend[params, obs], error) {
		spec, err := proxy.ConfigSpec[v1alpha1.ProviderConfigSpec](cfg)
		if err != nil {
			return nil, err
		}
		kc, _, err := cfg.SecretKey(ctx, kube, *spec.Credentials.SecretRef)
		if err != nil {
			return nil, err
		}
		return r.backend(string(kc)), nil
	}
}

type (
	gparams = gcpv1alpha1.GCPProxyParameters
	gobs    = gcpv1alpha1.GCPProxyObservation
)

// startProviders runs the config controllers and the kubernetes and (when
// g is not nil) gcp proxy controllers, with management policies on.
func startProviders(t *testing.T, e *kube.Env, k *recorder[params, obs], g *recorder[gparams, gobs]) {
	t.Helper()
	e.RunManager(t, func(mgr ctrl.Manager, o controller.Options) error {
		o.Features = &feature.Flags{}
		o.Features.Enable(feature.EnableBetaManagementPolicies)
		if err := config.Setup(mgr, o); err != nil {
			return err
		}
		po := proxy.Options{Options: o, ProviderInstance: "test", CredentialsKey: []byte("a test key of thirty-two bytes..")}
		if err := kubernetesproxy.Controller.Setup(mgr, po, kubernetesFactory(k)); err != nil {
			return err
		}
		if g == nil {
			return nil
		}
		return gcpproxy.Controller.Setup(mgr, po, func(context.Context, client.Client, proxy.Config) (backend.Backend[gparams, gobs], error) {
			return g.backend(""), nil
		})
	})
}

func createAll(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatalf("cannot create %T %s: %v", o, o.GetName(), err)
		}
	}
}

func kubeconfigSecret(ns string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubeconfig"}, Data: map[string][]byte{"kubeconfig": []byte("team-kubeconfig")}}
}

func gone(c client.Client, o client.Object) (bool, string) {
	err := c.Get(context.Background(), client.ObjectKeyFromObject(o), o)
	return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprintf("%s still there, finalizers %v (%v)", o.GetName(), o.GetFinalizers(), err)
}

// TestGeneratedCredentialsPerKind: names are unique per kind only, so a
// KubernetesProxy and a GCPProxy may both be called web; each must get
// credentials of its own, stored nowhere but in its connection Secret.
func TestGeneratedCredentialsPerKind(t *testing.T) {
	e := kube.Shared(t)
	ns := e.Namespace(t, "perkind")
	k, g := newRecorder[params, obs](), newRecorder[gparams, gobs]()
	startProviders(t, e, k, g)
	gmg := &gcpv1alpha1.GCPProxy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: gcpv1alpha1.GCPProxySpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "target"}},
			ForProvider: gparams{
				Zone:            "us-central1-a",
				ProxyParameters: commonv1alpha1.ProxyParameters{AllowedClientCIDRs: []string{"10.0.0.0/8"}},
			},
		},
	}
	kmg := kubernetesProxy(ns, "web")
	createAll(t, e.Client, kubeconfigSecret(ns), providerConfig(ns),
		&gcpv1alpha1.ProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target"},
			Spec: gcpv1alpha1.ProviderConfigSpec{ProjectID: "test-project", Credentials: gcpv1alpha1.Credentials{
				Source:    gcpv1alpha1.CredentialsSourceSecret,
				SecretRef: &commonv1alpha1.SecretKeySelector{SecretReference: commonv1alpha1.SecretReference{Name: "gcp-key"}, Key: "key"},
			}},
		},
		kmg, gmg)

	for _, mg := range []interface {
		client.Object
		GetCondition(xpv2.ConditionType) xpv2.Condition
	}{kmg, gmg} {
		kube.Eventually(t, fmt.Sprintf("%T to be Ready", mg), func() (bool, string) {
			err := e.Client.Get(t.Context(), client.ObjectKeyFromObject(mg), mg)
			c := mg.GetCondition(xpv2.TypeReady)
			return err == nil && c.Status == corev1.ConditionTrue, fmt.Sprint(c, err)
		})
	}

	cases := map[string]struct {
		reason string
		owner  client.Object
		used   func(string) []call
	}{
		"KubernetesProxy": {reason: "The KubernetesProxy gets generated credentials of its own.", owner: kmg, used: k.writes},
		"GCPProxy":        {reason: "The GCPProxy gets generated credentials of its own.", owner: gmg, used: g.writes},
	}
	passwords := map[string]bool{}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &corev1.Secret{}
			err := e.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: proxy.GeneratedSecretName(tc.owner, name)}, s)
			if !kerrors.IsNotFound(err) {
				t.Errorf("%s\ngenerated credentials must not be stored in a Secret: Get = %v", tc.reason, err)
			}
			w := tc.used(ns)
			if len(w) == 0 || w[0].op != "create" || w[0].creds.Username != proxy.GeneratedUsername || len(w[0].creds.Password) != 32 {
				t.Fatalf("%s\nthe backend must be created with generated credentials; calls: %+v", tc.reason, w)
			}
			passwords[w[0].creds.Password] = true
		})
	}
	if len(passwords) != 2 {
		t.Errorf("the two kinds must have distinct credentials, got %d distinct passwords", len(passwords))
	}
	kube.Eventually(t, "the KubernetesProxy's connection Secret to carry its password", func() (bool, string) {
		s := &corev1.Secret{}
		err := e.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "web-conn"}, s)
		w := k.writes(ns)
		return err == nil && len(w) > 0 && string(s.Data[proxy.ConnectionPassword]) == w[0].creds.Password, fmt.Sprint(err)
	})
}

// TestForeignGeneratedSecretIsNotUsed: a Secret that happens to have the
// name earlier versions kept generated credentials in, but is not
// controlled by the resource, must be neither used (its author would know
// the password) nor changed, nor hold the resource up.
func TestForeignGeneratedSecretIsNotUsed(t *testing.T) {
	e := kube.Shared(t)
	ns := e.Namespace(t, "foreign")
	k := newRecorder[params, obs]()
	startProviders(t, e, k, nil)
	name := "web-kubernetesproxy-credentials"
	foreign := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data:       map[string][]byte{proxy.SecretKeyUsername: []byte("intruder"), proxy.SecretKeyPassword: []byte("known-to-them")},
	}
	createAll(t, e.Client, foreign, kubeconfigSecret(ns), providerConfig(ns), kubernetesProxy(ns, "web"))
	rv := foreign.GetResourceVersion()

	kube.Eventually(t, "Ready=True", func() (bool, string) {
		c, err := condition(e.Client, types.NamespacedName{Namespace: ns, Name: "web"}, xpv2.TypeReady)
		return err == nil && c.Status == corev1.ConditionTrue, fmt.Sprint(c, err)
	})
	got := &corev1.Secret{}
	if err := e.Client.Get(t.Context(), client.ObjectKeyFromObject(foreign), got); err != nil {
		t.Fatal(err)
	}
	if got.GetResourceVersion() != rv || len(got.OwnerReferences) != 0 {
		t.Errorf("the foreign Secret must not be changed: resource version %s -> %s, owners %+v", rv, got.GetResourceVersion(), got.OwnerReferences)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.calls {
		if c.namespace == ns && (c.creds.Username != proxy.GeneratedUsername || c.creds.Password == "known-to-them") {
			t.Errorf("the backend must see only generated credentials: %s %s as %q", c.op, c.name, c.creds.Username)
		}
	}
}

// TestObserveOnlyIsSideEffectFree: importing an existing proxy with
// managementPolicies [Observe] creates and changes nothing: no generated
// Secret, no backend write, not even for an instance that differs from the
// spec, nor when the resource is deleted.
func TestObserveOnlyIsSideEffectFree(t *testing.T) {
	e := kube.Shared(t)
	ns := e.Namespace(t, "observe")
	k := newRecorder[params, obs]()
	k.stale = true
	k.instances["egp-imported"] = backend.Desired[params]{Name: "egp-imported"}
	startProviders(t, e, k, nil)

	imported := kubernetesProxy(ns, "imported")
	imported.SetAnnotations(map[string]string{"crossplane.io/external-name": "egp-imported"})
	missing := kubernetesProxy(ns, "missing")
	for _, mg := range []*v1alpha1.KubernetesProxy{imported, missing} {
		mg.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve}
	}
	createAll(t, e.Client, kubeconfigSecret(ns), providerConfig(ns), imported, missing)

	kube.Eventually(t, "the imported proxy to be observed", func() (bool, string) {
		mg := &v1alpha1.KubernetesProxy{}
		err := e.Client.Get(t.Context(), client.ObjectKeyFromObject(imported), mg)
		return err == nil && mg.Status.AtProvider.Endpoint == "egress.example:3128" && mg.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue,
			fmt.Sprint(mg.Status.AtProvider, err)
	})
	kube.Eventually(t, "the connection Secret, without credentials nobody knows", func() (bool, string) {
		s := &corev1.Secret{}
		err := e.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "imported-conn"}, s)
		_, pw := s.Data[proxy.ConnectionPassword]
		return err == nil && string(s.Data[proxy.ConnectionURL]) == "http://egress.example:3128" && !pw, fmt.Sprint(s.Data, err)
	})
	kube.Eventually(t, "the missing proxy to say it does not exist", func() (bool, string) {
		c, err := condition(e.Client, client.ObjectKeyFromObject(missing), xpv2.TypeSynced)
		return err == nil && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "does not exist"), fmt.Sprint(c, err)
	})
	for _, mg := range []*v1alpha1.KubernetesProxy{imported, missing} {
		if err := e.Client.Delete(t.Context(), mg); err != nil {
			t.Fatal(err)
		}
		kube.Eventually(t, mg.GetName()+" to be gone", func() (bool, string) { return gone(e.Client, mg) })
	}

	if w := k.writes(ns); len(w) != 0 {
		t.Errorf("observe-only resources must not write to the backend, got %+v", w)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.instances["egp-imported"]; !ok {
		t.Error("the imported instance must survive the deletion of its observe-only resource")
	}
	l := &corev1.SecretList{}
	if err := e.Client.List(t.Context(), l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range l.Items {
		if strings.HasSuffix(s.GetName(), "-credentials") {
			t.Errorf("observe-only resources must not generate credentials, found Secret %s", s.GetName())
		}
	}
}

// TestNamespaceDeletion deletes a team namespace and, all at once, what the
// namespace controller would delete in it: the proxy, its provider config,
// the config's kubeconfig Secret and the generated
// credentials Secret. In a terminating namespace nothing can be created. The
// proxy must still delete its instance with working backend credentials,
// and then everything must go. (envtest runs no namespace controller or
// garbage collector, so the test deletes what they would.)
func TestNamespaceDeletion(t *testing.T) {
	e := kube.Shared(t)
	ns := e.Namespace(t, "teardown")
	k := newRecorder[params, obs]()
	startProviders(t, e, k, nil)
	kc, pc, mg := kubeconfigSecret(ns), providerConfig(ns), kubernetesProxy(ns, "web")
	createAll(t, e.Client, kc, pc, mg)

	kube.Eventually(t, "Ready, and the config and its Secret held by their users", func() (bool, string) {
		c, err := condition(e.Client, client.ObjectKeyFromObject(mg), xpv2.TypeReady)
		_ = e.Client.Get(t.Context(), client.ObjectKeyFromObject(pc), pc)
		_ = e.Client.Get(t.Context(), client.ObjectKeyFromObject(kc), kc)
		return err == nil && c.Status == corev1.ConditionTrue &&
				slices.Contains(pc.GetFinalizers(), config.FinalizerInUse) && slices.Contains(kc.GetFinalizers(), config.FinalizerSecretInUse),
			fmt.Sprint(c, err, pc.GetFinalizers(), kc.GetFinalizers())
	})

	doomed := []client.Object{
		mg, pc, kc,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: proxy.GeneratedSecretName(mg, v1alpha1.KubernetesProxyKind)}},
	}
	for _, o := range doomed {
		if err := e.Client.Delete(t.Context(), o); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	for _, o := range doomed[:3] {
		kube.Eventually(t, fmt.Sprintf("%T %s to be gone", o, o.GetName()), func() (bool, string) {
			return gone(e.Client, o)
		})
	}
	w := k.writes(ns)
	if len(w) < 2 || w[len(w)-1].op != "delete" {
		t.Fatalf("the instance must be deleted, calls %+v", w)
	}
	if d := w[len(w)-1]; d.secret != "team-kubeconfig" {
		t.Errorf("the instance must be deleted with the config's credentials, got %q", d.secret)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for name, d := range k.instances {
		if d.Ownership.Owner.Namespace == ns {
			t.Errorf("instance %s is left", name)
		}
	}
}
