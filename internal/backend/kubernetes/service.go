/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// IDScheme is the scheme of the IDs of Kubernetes instances:
// kubernetes://<cluster>/<namespace>/<name>.
const IDScheme = "kubernetes"

const (
	errScheme = "cannot build the scheme of the target cluster client"
	errClient = "cannot create a client for the target cluster"
)

// kube is the part of the controller-runtime client the backend uses, so a
// test can see at a glance what to fake.
type kube interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
	List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
	Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error
	Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error
}

// Params and Observation are the backend's own types.
type (
	Params      = v1alpha1.KubernetesProxyParameters
	Observation = v1alpha1.KubernetesProxyObservation
)

// Backend runs egress proxies in one Kubernetes cluster.
type Backend struct {
	kube    kube
	cluster string
	policy  *Policy
	// verifier remembers which htpasswd files accept which credentials,
	// so a steady-state Observe costs no bcrypt (~60 ms) and a rotated
	// password is still noticed at once. One per backend: its memory goes
	// with the provider config it serves.
	verifier *squid.Verifier
	// sums spares Observe rendering the squid configuration.
	sums squid.Sums
	// reads serves the reads of Observe: kube, or a watch cache.
	reads reader
	// watch is the watch cache of NewForConfig; nil without one.
	watch *watchCache
	// noWatch turns the watch cache of NewForConfig off.
	noWatch bool
	// logs reads the traffic figures of the pods; nil reports none.
	logs podLogs
	// counts are the traffic figures last read (traffic.go), each used
	// for trafficTTL.
	counts     trafficCounts
	trafficTTL time.Duration
}

// reader is the part of kube that Observe reads with.
type reader interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
	List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error
}

// Option configures a Backend.
type Option func(*Backend)

// WithClusterID sets the cluster part of instance IDs. It must be stable for
// the cluster: IDs are recorded in resource status.
func WithClusterID(id string) Option {
	return func(b *Backend) { b.cluster = id }
}

// WithoutWatchCache makes NewForConfig read everything from the API server,
// as New does.
func WithoutWatchCache() Option {
	return func(b *Backend) { b.noWatch = true }
}

// WithVerifier sets the Verifier of htpasswd files, e.g. one shared by the
// backends of a test. By default each Backend has its own.
func WithVerifier(v *squid.Verifier) Option {
	return func(b *Backend) { b.verifier = v }
}

// New returns a Backend that manages objects through c. c must know the
// core/v1, apps/v1 and policy/v1 types (see NewScheme).
func New(c client.Client, o ...Option) *Backend {
	b := &Backend{kube: c, cluster: "cluster", verifier: squid.NewVerifier(), trafficTTL: defaultTrafficTTL}
	for _, fn := range o {
		fn(b)
	}
	b.reads = b.kube
	return b
}

// NewForConfig returns a Backend for the cluster cfg reaches, whose cluster
// ID is ClusterID(cfg.Host) unless an option sets another. It makes no call:
// an unreachable cluster shows up in the first Observe. Unless
// WithoutWatchCache, Observe reads through informers started by the first
// Observe (see watchCache), and Close stops them.
func NewForConfig(cfg *rest.Config, o ...Option) (*Backend, error) {
	s, err := NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, backend.Permanent(errors.Wrap(err, errClient))
	}
	cs, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, backend.Permanent(errors.Wrap(err, errClient))
	}
	b := New(c, append([]Option{WithClusterID(ClusterID(cfg.Host))}, o...)...)
	b.logs = clientLogs{pods: cs}
	if !b.noWatch {
		b.watch = newWatchCache(cfg, s, b.kube)
		b.kube = recording{kube: b.kube, w: b.watch}
		b.reads = b.watch
	}
	return b, nil
}

// Close stops the watch cache, if any. The provider closes a backend when
// it builds another for a changed provider config.
func (b *Backend) Close() error {
	if b.watch == nil {
		return nil
	}
	return b.watch.Close()
}

// Watch makes fn be called with the ownership of every instance one of
// whose parts changed or was deleted in the cluster, as the watch cache
// sees it; a later call replaces fn. Without a watch cache it does nothing.
func (b *Backend) Watch(fn func(backend.Ownership)) {
	if b.watch != nil {
		b.watch.setNotify(fn)
	}
}

// NewScheme returns a scheme with the types the backend manages.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, errors.Wrap(err, errScheme)
		}
	}
	return s, nil
}

// ClusterID returns a stable, slash-free identity of the cluster an API
// server URL reaches: its host and port, plus any path (clusters behind a
// proxy such as Rancher share a host) with slashes made underscores. The
// in-cluster address (10.96.0.1:443) is the same for many clusters, but an
// ID only needs to find the instance again through the same provider config.
func ClusterID(host string) string {
	u, err := url.Parse(host)
	if err != nil || u.Host == "" {
		// A bare host:port, as rest.Config allows.
		return strings.ReplaceAll(strings.Trim(host, "/"), "/", "_")
	}
	id := u.Host
	if p := strings.Trim(u.Path, "/"); p != "" {
		id += "_" + strings.ReplaceAll(p, "/", "_")
	}
	return id
}

// id returns the instance ID of the instance name in namespace ns.
func (b *Backend) id(ns, name string) string {
	return backend.FormatID(IDScheme, b.cluster, ns, name)
}
