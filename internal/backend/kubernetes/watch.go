/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"reflect"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// pendingTTL bounds how long a read of an object this backend wrote goes to
// the API server while the watch has not delivered the write. A watch that
// relisted may never deliver that exact version; the cache is then newer.
const pendingTTL = 30 * time.Second

// watchCache serves the reads of Observe from informers on the target
// cluster, one per kind, selected by the managed-by label (nodes: all), so a
// steady-state poll reads nothing from the API server. It is started by the
// first read and stopped by Close.
//
// A kind is read from the API server instead while its informer has not
// synced or its list or watch failed (credentials without list or watch on
// it, such as no cluster-wide list on nodes): the cache is a saving, never
// a condition. An object this backend wrote is read from the API server
// until its watch delivers the write, so Observe after Create or Update
// sees what they did.
//
// A change to, or deletion of, an owned Deployment, ConfigMap, Secret,
// Service or PodDisruptionBudget is reported to the function Watch set.
type watchCache struct {
	cfg    *rest.Config
	scheme *runtime.Scheme
	direct kube

	mu        sync.Mutex
	started   bool
	closed    bool
	cancel    context.CancelFunc
	done      chan struct{}
	cache     cache.Cache
	informers map[reflect.Type]cache.Informer
	broken    map[string]bool
	pending   map[objectKey]pendingWrite
	notify    func(backend.Ownership)
}

// objectKey names one object of one kind.
type objectKey struct {
	kind      reflect.Type
	namespace string
	name      string
}

// pendingWrite is a write the watch has not delivered yet.
type pendingWrite struct {
	resourceVersion string
	deleted         bool
	at              time.Time
}

// watched are the kinds read through the cache; owned ones are reported to
// Watch when they change.
var watched = []struct {
	obj   client.Object
	owned bool
}{
	{&appsv1.Deployment{}, true},
	{&corev1.ConfigMap{}, true},
	{&corev1.Secret{}, true},
	{&corev1.Service{}, true},
	{&policyv1.PodDisruptionBudget{}, true},
	{&corev1.Pod{}, false},
	{&corev1.Node{}, false},
}

func newWatchCache(cfg *rest.Config, s *runtime.Scheme, direct kube) *watchCache {
	cfg = rest.CopyConfig(cfg)
	// A watch is a long request: the per-call timeout of the backend's
	// client would cut every watch short.
	cfg.Timeout = 0
	return &watchCache{
		cfg: cfg, scheme: s, direct: direct,
		informers: map[reflect.Type]cache.Informer{},
		broken:    map[string]bool{},
		pending:   map[objectKey]pendingWrite{},
	}
}

// start starts the informers once; it reports whether the cache runs.
func (w *watchCache) start() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	if w.started {
		return w.cache != nil
	}
	w.started = true
	ours, err := labels.NewRequirement(backend.KubernetesLabelKeys.ManagedBy, selection.Equals, []string{backend.ManagedByValue})
	if err != nil {
		return false
	}
	c, err := cache.New(w.cfg, cache.Options{
		Scheme:                   w.scheme,
		DefaultLabelSelector:     labels.NewSelector().Add(*ours),
		ByObject:                 map[client.Object]cache.ByObject{&corev1.Node{}: {Label: labels.Everything()}},
		DefaultTransform:         cache.TransformStripManagedFields(),
		DefaultWatchErrorHandler: w.watchError,
	})
	if err != nil {
		// Reads go to the API server, as without a cache.
		return false
	}
	ctx, cancel := context.WithCancel(context.Background())
	for _, k := range watched {
		i, err := c.GetInformer(ctx, k.obj, cache.BlockUntilSynced(false))
		if err != nil {
			cancel()
			return false
		}
		if _, err := i.AddEventHandler(w.handler(reflect.TypeOf(k.obj), k.owned)); err != nil {
			cancel()
			return false
		}
		w.informers[reflect.TypeOf(k.obj)] = i
	}
	w.cache, w.cancel, w.done = c, cancel, make(chan struct{})
	go func() {
		defer close(w.done)
		_ = c.Start(ctx)
	}()
	return true
}

// Close stops the informers and waits for them to stop. Reads go to the
// API server afterwards.
func (w *watchCache) Close() error {
	w.mu.Lock()
	w.closed = true
	cancel, done := w.cancel, w.done
	w.cache = nil
	w.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}

// watchError marks a kind whose list or watch is refused: it is read from
// the API server from then on. Other errors are retried by the informer.
func (w *watchCache) watchError(ctx context.Context, r *toolscache.Reflector, err error) {
	toolscache.DefaultWatchErrorHandler(ctx, r, err)
	if kerrors.IsForbidden(err) || kerrors.IsUnauthorized(err) || kerrors.IsNotFound(err) {
		w.mu.Lock()
		w.broken[r.TypeDescription()] = true
		w.mu.Unlock()
	}
}

// reader returns where to read the object of key (a list of its kind, when
// key.name is empty) from.
func (w *watchCache) reader(key objectKey) client.Reader {
	if !w.start() {
		return w.direct
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	i, ok := w.informers[key.kind]
	if !ok || w.cache == nil || w.broken[key.kind.String()] || !i.HasSynced() {
		return w.direct
	}
	if p, ok := w.pending[key]; ok {
		if time.Since(p.at) < pendingTTL {
			return w.direct
		}
		delete(w.pending, key)
	}
	return w.cache
}

// Get reads obj from the cache when it can serve it.
func (w *watchCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return w.reader(objectKey{kind: reflect.TypeOf(obj), namespace: key.Namespace, name: key.Name}).Get(ctx, key, obj, opts...)
}

// List lists from the cache when it can serve the kind of list.
func (w *watchCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	var kind reflect.Type
	if _, ok := list.(*corev1.PodList); ok {
		kind = reflect.TypeOf(&corev1.Pod{})
	}
	if kind == nil {
		return w.direct.List(ctx, list, opts...)
	}
	return w.reader(objectKey{kind: kind}).List(ctx, list, opts...)
}

// wrote records a write of obj (deleted: a delete) the watch has yet to
// deliver. A local API server often delivers the event before the write's
// own response: then the cache already holds the write, and nothing is
// recorded.
func (w *watchCache) wrote(obj client.Object, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cache == nil {
		return
	}
	kind := reflect.TypeOf(obj)
	if i, ok := w.informers[kind]; ok && i.HasSynced() {
		// The informer updates its store before it calls the handlers, so
		// an event seen will not clear what is recorded after it.
		cached, _ := reflect.New(kind.Elem()).Interface().(client.Object)
		err := w.cache.Get(context.Background(), client.ObjectKeyFromObject(obj), cached)
		switch {
		case deleted && kerrors.IsNotFound(err):
			return
		case !deleted && err == nil && atLeast(cached.GetResourceVersion(), obj.GetResourceVersion()):
			return
		}
	}
	w.pending[objectKey{kind: kind, namespace: obj.GetNamespace(), name: obj.GetName()}] = pendingWrite{
		resourceVersion: obj.GetResourceVersion(), deleted: deleted, at: time.Now(),
	}
}

// seen clears the pending write the watch delivered with obj.
func (w *watchCache) seen(kind reflect.Type, obj metaObject, deleted bool) {
	k := objectKey{kind: kind, namespace: obj.GetNamespace(), name: obj.GetName()}
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.pending[k]
	if !ok {
		return
	}
	if deleted || (!p.deleted && atLeast(obj.GetResourceVersion(), p.resourceVersion)) {
		delete(w.pending, k)
	}
}

// atLeast tells whether resource version have is want or newer. Resource
// versions are opaque by contract, but etcd's are increasing integers; any
// other kind is compared for equality, which costs at most pendingTTL of
// reads from the API server.
func atLeast(have, want string) bool {
	if have == want {
		return true
	}
	h, herr := strconv.ParseUint(have, 10, 64)
	w, werr := strconv.ParseUint(want, 10, 64)
	return herr == nil && werr == nil && h >= w
}

// setNotify sets the function told of changed instances.
func (w *watchCache) setNotify(fn func(backend.Ownership)) {
	w.mu.Lock()
	w.notify = fn
	w.mu.Unlock()
	w.start()
}

func (w *watchCache) changed(obj metaObject) {
	own, ok := backend.OwnershipFromLabels(backend.KubernetesLabelKeys, obj.GetLabels())
	if !ok {
		return
	}
	w.mu.Lock()
	fn := w.notify
	w.mu.Unlock()
	if fn != nil {
		fn(own)
	}
}

type metaObject interface {
	GetNamespace() string
	GetName() string
	GetResourceVersion() string
	GetLabels() map[string]string
}

func (w *watchCache) handler(kind reflect.Type, owned bool) toolscache.ResourceEventHandler {
	object := func(o any) metaObject {
		if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = t.Obj
		}
		m, err := meta.Accessor(o)
		if err != nil {
			return nil
		}
		return m
	}
	report := func(m metaObject) {
		if owned {
			w.changed(m)
		}
	}
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(o any, initial bool) {
			if m := object(o); m != nil {
				w.seen(kind, m, false)
				// The initial list is what the first poll reads anyway.
				if !initial {
					report(m)
				}
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, m := object(oldObj), object(newObj)
			if m == nil {
				return
			}
			w.seen(kind, m, false)
			// Equal versions are a resync, not a change.
			if old == nil || old.GetResourceVersion() != m.GetResourceVersion() {
				report(m)
			}
		},
		DeleteFunc: func(o any) {
			if m := object(o); m != nil {
				w.seen(kind, m, true)
				report(m)
			}
		},
	}
}

// recording is the client of a Backend with a watch cache: it tells the
// cache of every write, so reads of that object skip the cache until the
// watch delivers it.
type recording struct {
	kube
	w *watchCache
}

func (r recording) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := r.kube.Create(ctx, obj, opts...)
	if err == nil {
		r.w.wrote(obj, false)
	}
	return err
}

func (r recording) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := r.kube.Update(ctx, obj, opts...)
	if err == nil {
		r.w.wrote(obj, false)
	}
	return err
}

func (r recording) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := r.kube.Delete(ctx, obj, opts...)
	if err == nil {
		r.w.wrote(obj, true)
	}
	return err
}
