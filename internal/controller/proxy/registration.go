/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"reflect"
	"strconv"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

const (
	errAddCollector      = "cannot add the garbage collector"
	errAddHealth         = "cannot add the health reporter"
	errConfigSpec        = "cannot read the spec of the provider config"
	errFmtNewObject      = "cannot make an object of kind %s"
	errFmtNoPolicyKind   = "provider config kind %s carries no policy (GetProxyPolicy)"
	errFmtInformer       = "cannot watch the deletions of %s"
	errFmtCredentialsKey = "the key of generated passwords must hold at least %d bytes"
)

// Env is what the provider gives every backend factory besides the
// backend's own flags.
type Env struct {
	// Self is the provider's own API server: in a pod the in-cluster
	// config, outside (make dev) what KUBECONFIG says.
	Self *rest.Config
	// CallTimeout bounds one backend call.
	CallTimeout time.Duration
	// ReconcileRate is --max-reconcile-rate: a backend's API client sized
	// for it (as ratelimiter.LimitRESTConfig sizes the provider's own)
	// keeps up with the reconciles; zero leaves the backend's default.
	ReconcileRate int
	// Deletions tells the factory's ClientCache which configs of the
	// backend were deleted; Controller.Flags sets it.
	Deletions *Deletions
}

// A Registration is the controller side of one backend, as cmd/provider
// lists it.
type Registration interface {
	// Description is the backend's entry in registry.Backends.
	Description() backend.Description
	// Flags declares the backend's own provider flags on app, and returns
	// the setup of its controllers, to call once app has parsed them.
	Flags(app *kingpin.Application) func(mgr ctrl.Manager, o Options, env Env) error
}

// Controller is the controller side of one backend, for the managed
// resource kind M whose backend takes parameters P and reports O. A
// <kind>proxy package exports one; everything else (connector, reconciler,
// garbage collector, health reporter, config kinds) is built from it here.
type Controller[M resource.ModernManaged, P, O any] struct {
	// Backend is the backend's description, also listed in registry.Backends.
	Backend backend.Description
	// Kind maps the managed resource onto the backend's parameters and the
	// backend's observation onto the managed resource's status.
	Kind Kind[M, P, O]
	// Factory declares the backend's own flags on app and returns what
	// builds the backend factory once they are parsed.
	Factory func(app *kingpin.Application) func(Env) BackendFactory[P, O]
}

// Description returns c.Backend.
func (c Controller[M, P, O]) Description() backend.Description { return c.Backend }

// Flags declares the backend's flags and returns the setup of its
// controllers.
func (c Controller[M, P, O]) Flags(app *kingpin.Application) func(ctrl.Manager, Options, Env) error {
	build := c.Factory(app)
	return func(mgr ctrl.Manager, o Options, env Env) error {
		env.Deletions = &Deletions{}
		if err := c.Setup(mgr, o, build(env)); err != nil {
			return err
		}
		return c.forgetDeleted(mgr.GetCache(), mgr.GetScheme(), env.Deletions)
	}
}

// forgetDeleted feeds d the deletions of the backend's configs, as the
// manager's cache sees them.
func (c Controller[M, P, O]) forgetDeleted(informers cache.Informers, s *runtime.Scheme, d *Deletions) error {
	for _, gvk := range []schema.GroupVersionKind{c.Backend.ProviderConfig(), c.Backend.ClusterProviderConfig()} {
		// The context only bounds waiting for an informer of a cache that
		// already runs; setup has none of its own.
		i, err := informers.GetInformer(context.Background(), mustNew[client.Object](s, gvk))
		if err != nil {
			return errors.Wrapf(err, errFmtInformer, gvk)
		}
		if _, err := i.AddEventHandler(d.handler()); err != nil {
			return errors.Wrapf(err, errFmtInformer, gvk)
		}
	}
	return nil
}

// Setup adds the managed reconciler of the backend to mgr, and its garbage
// collector and health reporter when they are on. A nil factory registers
// the reconciler anyway, so resources report that the backend is missing
// instead of being ignored.
func (c Controller[M, P, O]) Setup(mgr ctrl.Manager, o Options, f BackendFactory[P, O]) error {
	if len(o.CredentialsKey) < MinCredentialsKey {
		return errors.Errorf(errFmtCredentialsKey, MinCredentialsKey)
	}
	s := mgr.GetScheme()
	b := c.Backend
	mg, err := newAs[M](s, b.Managed)
	if err != nil {
		return err
	}
	// Fail at start-up, not at the first reconcile, when a kind is missing.
	for _, gvk := range []schema.GroupVersionKind{b.ProviderConfig(), b.ClusterProviderConfig(), backend.ListOf(b.ProviderConfig()), backend.ListOf(b.ClusterProviderConfig()), backend.ListOf(b.Managed)} {
		if !s.Recognizes(gvk) {
			return errors.Errorf(errFmtNewObject, gvk)
		}
	}
	for _, gvk := range []schema.GroupVersionKind{b.ProviderConfig(), b.ClusterProviderConfig()} {
		if _, ok := mustNew[client.Object](s, gvk).(PolicyHolder); !ok {
			return errors.Errorf(errFmtNoPolicyKind, gvk)
		}
	}
	conn := NewConnector(ConnectorConfig[M, P, O]{
		Kube:    mgr.GetClient(),
		Kind:    c.Kind,
		Backend: b.Name,
		Policy:  b.Policy,
		NewConfigs: func() (client.Object, client.Object) {
			return mustNew[client.Object](s, b.ProviderConfig()), mustNew[client.Object](s, b.ClusterProviderConfig())
		},
		NewBackend: f,
		APIReader:  mgr.GetAPIReader(),
	}, o)
	if f != nil {
		cc := CollectorConfig[P, O]{
			Backend:    b.Name,
			Kube:       mgr.GetClient(),
			NewBackend: f,
			NewOwners:  func() client.ObjectList { return mustNew[client.ObjectList](s, backend.ListOf(b.Managed)) },
			NewConfigs: func() (client.ObjectList, client.ObjectList) {
				return mustNew[client.ObjectList](s, backend.ListOf(b.ProviderConfig())), mustNew[client.ObjectList](s, backend.ListOf(b.ClusterProviderConfig()))
			},
		}
		if o.GCInterval > 0 {
			if err := mgr.Add(NewCollector(cc, o)); err != nil {
				return errors.Wrap(err, errAddCollector)
			}
		}
		if o.HealthInterval > 0 {
			if err := mgr.Add(NewHealthReporter(cc, b.Name, o)); err != nil {
				return errors.Wrap(err, errAddHealth)
			}
		}
	}
	credentialsRef := func(m M) string {
		if r := c.Kind.Proxy(m).CredentialsSecretRef; r != nil {
			return r.Name
		}
		return ""
	}
	return Setup(mgr, o, b.Managed, mg, conn, b.MaxNameLength, credentialsRef)
}

// newAs returns a new object of kind gvk from s, as a T.
func newAs[T any](s *runtime.Scheme, gvk schema.GroupVersionKind) (T, error) {
	var zero T
	o, err := s.New(gvk)
	if err != nil {
		return zero, errors.Wrapf(err, errFmtNewObject, gvk)
	}
	t, ok := o.(T)
	if !ok {
		return zero, errors.Errorf(errFmtNewObject, gvk)
	}
	return t, nil
}

// mustNew is newAs for kinds Setup checked the scheme recognizes.
func mustNew[T any](s *runtime.Scheme, gvk schema.GroupVersionKind) T {
	t, err := newAs[T](s, gvk)
	if err != nil {
		panic(err)
	}
	return t
}

// ConfigSpec returns the spec of a resolved ProviderConfig or
// ClusterProviderConfig. Both kinds of a group share the spec type S, so
// one generic read serves every backend. A spec that does not read is
// Permanent: retrying reads the same object.
func ConfigSpec[S any](cfg Config) (S, error) {
	var spec S
	// Every config kind the provider registers is a struct whose Spec is
	// an S: copied from there (every reconcile connects, and the round
	// trip through unstructured was most of the cost of connecting).
	if v := reflect.ValueOf(cfg.Object); v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().Kind() == reflect.Struct {
		if f := v.Elem().FieldByName("Spec"); f.IsValid() && f.Type() == reflect.TypeOf(spec) {
			in := f.Interface().(S) //nolint:forcetypeassert // Its type was just checked.
			if c, ok := any(&in).(interface{ DeepCopyInto(out *S) }); ok {
				c.DeepCopyInto(&spec)
				return spec, nil
			}
		}
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cfg.Object)
	if err != nil {
		return spec, backend.Permanent(errors.Wrap(err, errConfigSpec))
	}
	m, _, err := unstructured.NestedMap(u, "spec")
	if err != nil {
		return spec, backend.Permanent(errors.Wrap(err, errConfigSpec))
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &spec); err != nil {
		return spec, backend.Permanent(errors.Wrap(err, errConfigSpec))
	}
	return spec, nil
}

// CacheKey is the key of the backend client of cfg in a ClientCache: one
// client per provider config.
func (cfg Config) CacheKey() string { return string(cfg.Object.GetUID()) }

// CacheVersion is the version of the backend client of cfg in a
// ClientCache: the config's generation and the resource version of the
// Secret the client was built from (empty when none), so editing the config
// or rotating its Secret rebuilds the client without a restart.
func (cfg Config) CacheVersion(secretVersion string) string {
	return strconv.FormatInt(cfg.Object.GetGeneration(), 10) + "/" + secretVersion
}

// KindOf returns the Kind of a managed resource kind M from what differs
// between kinds: where M keeps its parameters, where they keep the proxy's,
// and how M stores the backend's observation (extra) with the fields every
// kind reports (common).
func KindOf[M resource.ModernManaged, P, O any](params func(M) P, proxy func(P) commonv1alpha1.ProxyParameters, observe func(mg M, extra O, common commonv1alpha1.ProxyObservation), maxNameLen int) Kind[M, P, O] {
	return kindFns[M, P, O]{params: params, proxy: proxy, observe: observe, maxNameLen: maxNameLen}
}

type kindFns[M resource.ModernManaged, P, O any] struct {
	params     func(M) P
	proxy      func(P) commonv1alpha1.ProxyParameters
	observe    func(M, O, commonv1alpha1.ProxyObservation)
	maxNameLen int
}

func (k kindFns[M, P, O]) Proxy(mg M) commonv1alpha1.ProxyParameters { return k.proxy(k.params(mg)) }
func (k kindFns[M, P, O]) Params(mg M) P                             { return k.params(mg) }
func (k kindFns[M, P, O]) SetObservation(mg M, o backend.Observation[O]) {
	k.observe(mg, o.Extra, CommonObservation(o))
}
func (k kindFns[M, P, O]) MaxNameLength() int { return k.maxNameLen }
