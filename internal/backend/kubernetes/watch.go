/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"io"
	"maps"
	"reflect"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/watchconn"
)

// pendingTTL bounds how long a read of an object this backend wrote goes to
// the API server while the watch has not delivered the write. A watch that
// relisted may never deliver that exact version.
const pendingTTL = 30 * time.Second

// watchCache serves the reads of Observe from informers on the target
// cluster, one per kind, selected by the managed-by label (nodes: all), so a
// steady-state poll reads nothing from the API server. It is started by the
// first read and stopped by Close.
//
// A kind is read from the API server instead while its informer has not
// synced or its list or watch failed (credentials without list or watch on
// it, such as no cluster-wide list on nodes), and for a while after the
// target's API server did not answer (see liveness): the cache is a saving,
// never a condition. While it does not answer, Observe fails (vouch). An
// object this backend wrote is read from the API server until its watch
// delivers the write, so Observe after Create or Update sees what they did:
// from the write's response (ownWrite), or, after a delete, from the API
// server.
//
// A change to, or deletion of, an owned Deployment, ConfigMap, Secret,
// Service or PodDisruptionBudget is reported to the function Watch set.
type watchCache struct {
	cfg    *rest.Config
	scheme *runtime.Scheme
	direct kube

	mu        sync.Mutex
	started   bool
	startedAt time.Time
	closed    bool
	cancel    context.CancelFunc
	done      chan struct{}
	cache     cache.Cache
	informers map[reflect.Type]cache.Informer
	broken    map[string]bool
	pending   map[objectKey]pendingWrite
	// creates are the objects Create is creating: their creation is not
	// reported, since the reconciler observes again after a Create.
	creates map[objectKey]time.Time
	notify  func(backend.Ownership)
	// live tells whether the cache can be vouched for (see liveness).
	live *liveness
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
	// obj is the object as the write's response had it (nil after a
	// delete): what a read from the API server would return, unless
	// someone wrote it since, which the watch delivers.
	obj client.Object
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
	w := &watchCache{
		cfg: cfg, scheme: s, direct: direct,
		informers: map[reflect.Type]cache.Informer{},
		broken:    map[string]bool{},
		pending:   map[objectKey]pendingWrite{},
		creates:   map[objectKey]time.Time{},
	}
	probe, err := readyz(cfg)
	if err != nil {
		// A cache nothing vouches for is worse than none: reads go to the
		// API server.
		w.started = true
		return w
	}
	w.live = newLiveness(probe)
	w.live.onBack = w.restart
	return w
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
	w.started, w.startedAt = true, time.Now()
	ours, err := labels.NewRequirement(backend.KubernetesLabelKeys.ManagedBy, selection.Equals, []string{backend.ManagedByValue})
	if err != nil {
		return false
	}
	// Watches on a connection of their own, not among the writes' responses.
	hc, err := watchconn.NewHTTPClient(w.cfg)
	if err != nil {
		return false
	}
	c, err := cache.New(w.cfg, cache.Options{
		HTTPClient:           hc,
		Scheme:               w.scheme,
		DefaultLabelSelector: labels.NewSelector().Add(*ours),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}:       {Label: labels.Everything(), Transform: slimNode},
			&corev1.Pod{}:        {Transform: slimPod},
			&corev1.ConfigMap{}:  {Transform: slimConfigMap},
			&appsv1.Deployment{}: {Transform: slimDeployment},
		},
		DefaultTransform:         slimOwned,
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
	// Observe reads an instance's pods; without an index that is a scan of
	// every pod of the namespace, per Observe.
	if err := w.informers[podType].AddIndexers(toolscache.Indexers{podsByInstance: podInstance}); err != nil {
		cancel()
		return false
	}
	w.cache, w.cancel, w.done = c, cancel, make(chan struct{})
	go func() {
		defer close(w.done)
		// A stopped cache's connection goes with it, not when idle.
		defer hc.CloseIdleConnections()
		_ = c.Start(ctx)
	}()
	return true
}

// restartTimeout bounds how long restart waits for the new informers.
const restartTimeout = time.Minute

// restart replaces the informers once the target answers again after an
// outage. A reflector whose connections were refused backs off for up to a
// minute before it lists again, and nothing tells when it did, so the
// cache was not read for catchUp after an outage: every Observe read from
// the API server (7 GETs per proxy at N=200 after a minute's outage). New
// informers list at once. Once they have, every proxy the old cache knew
// is reported: a change during the outage shows in the lists, not as an
// event, and a proxy whose Observe failed during the outage would
// otherwise wait out its backoff.
func (w *watchCache) restart() {
	w.mu.Lock()
	if w.closed || w.cache == nil {
		w.mu.Unlock()
		return
	}
	old, cancel := w.cache, w.cancel
	w.started, w.cache, w.cancel, w.done = false, nil, nil, nil
	w.informers = map[reflect.Type]cache.Informer{}
	w.mu.Unlock()

	ctx, stop := context.WithTimeout(context.Background(), restartTimeout)
	defer stop()
	owners := w.owners(ctx, old)
	cancel()
	if !w.start() {
		return
	}
	w.mu.Lock()
	c, fn := w.cache, w.notify
	w.mu.Unlock()
	if c == nil || !c.WaitForCacheSync(ctx) {
		// Still not listed: the catch-up decides when the cache is read.
		return
	}
	w.live.caughtUp()
	if fn == nil {
		return
	}
	for _, o := range owners {
		fn(o)
	}
}

// owners returns the owners of the owned objects in c, each once.
func (w *watchCache) owners(ctx context.Context, c cache.Cache) []backend.Ownership {
	seen := map[types.UID]bool{}
	var out []backend.Ownership
	for _, k := range watched {
		if !k.owned {
			continue
		}
		gvk, err := apiutil.GVKForObject(k.obj, w.scheme)
		if err != nil {
			continue
		}
		o, err := w.scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err != nil {
			continue
		}
		l, ok := o.(client.ObjectList)
		if !ok || c.List(ctx, l, client.UnsafeDisableDeepCopy) != nil {
			continue
		}
		_ = meta.EachListItem(l, func(obj runtime.Object) error {
			m, err := meta.Accessor(obj)
			if err != nil {
				return nil
			}
			own, ok := backend.OwnershipFromLabels(backend.KubernetesLabelKeys, m.GetLabels())
			if ok && !seen[own.Owner.UID] {
				seen[own.Owner.UID] = true
				out = append(out, own)
			}
			return nil
		})
	}
	return out
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
// the API server from then on. Other errors are retried by the informer;
// one that is not the normal end of a watch means the cache may miss
// changes, so it is not read until a check finds the target answering.
// (A refused connection is retried inside the reflector and never gets
// here: the check of live finds that.)
func (w *watchCache) watchError(ctx context.Context, r *toolscache.Reflector, err error) {
	toolscache.DefaultWatchErrorHandler(ctx, r, err)
	switch {
	case kerrors.IsForbidden(err) || kerrors.IsUnauthorized(err) || kerrors.IsNotFound(err):
		w.mu.Lock()
		w.broken[r.TypeDescription()] = true
		w.mu.Unlock()
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.Canceled),
		kerrors.IsResourceExpired(err), kerrors.IsGone(err), kerrors.IsTooManyRequests(err), ctx.Err() != nil:
		// The normal end of a watch, throttling, or Close.
	default:
		w.live.failed(err)
	}
}

// answered tells the liveness check that the target answered a write
// with err: a success, or a refusal from the API server itself (a 4xx).
func (w *watchCache) answered(err error) {
	if w.live == nil {
		return
	}
	if serverAnswered(err) {
		w.live.answered()
	}
}

// vouch returns a Transient error while the target's API server does not
// answer and the cache serves reads: its last state is then no news of
// the instance. It asks the API server at most once per liveInterval.
func (w *watchCache) vouch(ctx context.Context) error {
	if !w.start() {
		// Reads go to the API server, and fail by themselves.
		return nil
	}
	return w.live.check(ctx)
}

// reader returns where to read the object of key (a list of its kind, when
// key.name is empty) from.
func (w *watchCache) reader(key objectKey) client.Reader {
	r, _ := w.cached(key)
	return r
}

// cached is reader, and whether it is the cache.
func (w *watchCache) cached(key objectKey) (client.Reader, bool) {
	if !w.start() {
		return w.direct, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	i, ok := w.informers[key.kind]
	if !ok || w.cache == nil || w.broken[key.kind.String()] || !i.HasSynced() || !w.live.fresh() {
		return w.direct, false
	}
	if p, ok := w.pending[key]; ok {
		if time.Since(p.at) < pendingTTL {
			if p.obj != nil {
				return ownWrite{Reader: w.direct, obj: p.obj}, false
			}
			return w.direct, false
		}
		delete(w.pending, key)
	}
	return w.cache, true
}

// ownWrite serves an object this backend wrote as the write's response had
// it, until the watch delivers the write. A read of the API server would
// return the same, unless someone wrote the object since, which the watch
// then delivers and reports as a change. While 1000 proxies converge the
// watch lags behind the writes, and such reads were most of the target's
// GETs (docs/bench.md at 22cd24f).
type ownWrite struct {
	client.Reader
	obj client.Object
}

func (o ownWrite) Get(ctx context.Context, key client.ObjectKey, out client.Object, opts ...client.GetOption) error {
	dst, src := reflect.ValueOf(out), reflect.ValueOf(o.obj)
	if key != client.ObjectKeyFromObject(o.obj) || dst.Type() != src.Type() || len(opts) != 0 {
		return o.Reader.Get(ctx, key, out, opts...)
	}
	// The stored object is never changed: each reader gets a copy.
	dst.Elem().Set(reflect.ValueOf(o.obj.DeepCopyObject()).Elem())
	return nil
}

// Get reads obj from the cache when it can serve it.
func (w *watchCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	k := objectKey{kind: reflect.TypeOf(obj), namespace: key.Namespace, name: key.Name}
	w.awaitSync(ctx, k.kind)
	return w.reader(k).Get(ctx, key, obj, opts...)
}

// firstSync is how long after the cache started a read waits for its
// kind's informer to sync. At a cold start, with many proxies, their first
// Observes came before the informers had listed, and each of their reads
// went to the API server: ~1 GET per new proxy at N=200 (docs/bench.md at 22cd24f),
// to learn what the lists bring a moment later. A kind whose list or
// watch is refused is marked broken by then, and not waited for.
const firstSync = 5 * time.Second

// awaitSync waits, within firstSync of the cache's start, until the
// informer of kind has synced, its list or watch failed, the target is
// known not to answer (liveness), or ctx is done.
func (w *watchCache) awaitSync(ctx context.Context, kind reflect.Type) {
	if !w.start() {
		return
	}
	w.mu.Lock()
	i, ok := w.informers[kind]
	deadline := w.startedAt.Add(firstSync)
	w.mu.Unlock()
	if !ok {
		return
	}
	for !i.HasSynced() && time.Now().Before(deadline) {
		w.mu.Lock()
		broken := w.broken[kind.String()]
		w.mu.Unlock()
		if broken || !w.live.fresh() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// List lists from the API server: the one list Observe makes, of an
// instance's pods, the cache serves in place (instancePods).
func (w *watchCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return w.direct.List(ctx, list, opts...)
}

var podType = reflect.TypeOf(&corev1.Pod{})

// podsByInstance indexes pods by namespace and instance label.
const podsByInstance = "egressproxy.instance"

func podInstance(o any) ([]string, error) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if v, ok := p.Labels[LabelInstance]; ok && p.Labels[LabelName] == appName {
		return []string{p.Namespace + "/" + v}, nil
	}
	return nil, nil
}

// instancePods returns the pods of instance ns/name, the cache's own
// objects (read only), when the cache serves pods (ok). A list through the
// cache copied every pod into the list and matched a label selector it
// parsed anew, per Observe: an eighth of what a steady poll allocated.
func (w *watchCache) instancePods(ctx context.Context, ns, name string) ([]*corev1.Pod, bool) {
	w.awaitSync(ctx, podType)
	if _, cached := w.cached(objectKey{kind: podType}); !cached {
		return nil, false
	}
	w.mu.Lock()
	i := w.informers[podType]
	w.mu.Unlock()
	idx, ok := i.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return nil, false
	}
	objs, err := idx.GetIndexer().ByIndex(podsByInstance, ns+"/"+name)
	if err != nil {
		return nil, false
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods, true
}

// wrote records a write of obj (deleted: a delete) the watch has yet to
// deliver; before is the version the write replaced ("" for a create). A
// local API server often delivers the event before the write's own
// response: then the cache already holds the write, and nothing is
// recorded. The write's response is served only while the cache holds the
// version it replaced: resource versions are opaque, so any other version
// may be newer than the write, and reads go to the API server.
func (w *watchCache) wrote(obj client.Object, before string, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cache == nil {
		return
	}
	serve := !deleted
	kind := reflect.TypeOf(obj)
	if i, ok := w.informers[kind]; ok && i.HasSynced() {
		// The informer updates its store before it calls the handlers, so
		// an event seen will not clear what is recorded after it.
		cached, _ := reflect.New(kind.Elem()).Interface().(client.Object)
		err := w.cache.Get(context.Background(), client.ObjectKeyFromObject(obj), cached)
		switch {
		case deleted && kerrors.IsNotFound(err):
			return
		case !deleted && err == nil && cached.GetResourceVersion() == obj.GetResourceVersion():
			return
		case err == nil:
			serve = serve && cached.GetResourceVersion() == before
		default:
			serve = serve && before == "" && kerrors.IsNotFound(err)
		}
	}
	p := pendingWrite{resourceVersion: obj.GetResourceVersion(), deleted: deleted, at: time.Now()}
	if serve {
		p.obj, _ = obj.DeepCopyObject().(client.Object)
	}
	w.pending[keyOf(obj)] = p
}

// creating records that Create is about to create obj; created forgets it
// when the create failed. Recorded before the request, since the watch may
// deliver the object before the request's response.
func (w *watchCache) creating(obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for k, at := range w.creates {
		// An object whose event never came (a relist delivered it as
		// part of the initial list) must not silence a later creation.
		if now.Sub(at) > pendingTTL {
			delete(w.creates, k)
		}
	}
	w.creates[keyOf(obj)] = now
}

func (w *watchCache) created(obj client.Object, err error) {
	if err == nil {
		return
	}
	w.mu.Lock()
	delete(w.creates, keyOf(obj))
	w.mu.Unlock()
}

// byCreate tells whether Create created the object of an add event, and
// forgets it.
func (w *watchCache) byCreate(kind reflect.Type, obj metaObject) bool {
	k := objectKey{kind: kind, namespace: obj.GetNamespace(), name: obj.GetName()}
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.creates[k]
	delete(w.creates, k)
	return ok && time.Since(at) <= pendingTTL
}

func keyOf(obj client.Object) objectKey {
	return objectKey{kind: reflect.TypeOf(obj), namespace: obj.GetNamespace(), name: obj.GetName()}
}

// seen clears the pending write the watch delivered with obj. Resource
// versions are opaque: only the written version itself shows the cache
// caught up. Another one may be older or newer (after a relist, or a
// write by someone else), so the write's response is no longer served,
// and reads go to the API server until that version arrives or pendingTTL
// passes.
func (w *watchCache) seen(kind reflect.Type, obj metaObject, deleted bool) {
	k := objectKey{kind: kind, namespace: obj.GetNamespace(), name: obj.GetName()}
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.pending[k]
	switch {
	case !ok:
	case deleted || (!p.deleted && obj.GetResourceVersion() == p.resourceVersion):
		delete(w.pending, k)
	case p.obj != nil:
		p.obj = nil
		w.pending[k] = p
	}
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
	// An event with news (not a resync, whose versions are equal) came
	// from a list or watch of the API server, which vouches for it as a
	// check would. While proxies come up, Deployments and pods change many
	// times a check interval.
	answered := func() {
		if w.live != nil {
			w.live.answered()
		}
	}
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(o any, initial bool) {
			if m := object(o); m != nil {
				answered()
				w.seen(kind, m, false)
				// Reported: a part Update made again (one a crash or a
				// user deleted) must be observed, and the reconciler does
				// not requeue after an Update by itself. It does after a
				// Create: the four creations of a new proxy would be four
				// more reconciles. The initial list is what the first poll
				// reads anyway.
				if !initial && !w.byCreate(kind, m) {
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
				answered()
				if !observedSame(oldObj, newObj) {
					report(m)
				}
				if readinessChanged(oldObj, newObj) {
					// Not an owned kind, but its labels carry the
					// ownership: the egress IPs are the nodes of ready
					// pods, and the Deployment's status may come before
					// its pods' (the proxy was Ready without an egress IP
					// until the next poll).
					w.changed(m)
				}
			}
		},
		DeleteFunc: func(o any) {
			if m := object(o); m != nil {
				answered()
				w.seen(kind, m, true)
				report(m)
			}
		},
	}
}

// readinessChanged tells whether a pod became ready or stopped being so.
func readinessChanged(oldObj, newObj any) bool {
	o, ok := oldObj.(*corev1.Pod)
	n, ok2 := newObj.(*corev1.Pod)
	return ok && ok2 && podReady(o) != podReady(n)
}

// observedSame tells whether a Deployment's update changed nothing
// Observe reads of it: its spec (generation), labels, deletion, and the
// status counts and stuck conditions readiness reports. While a new proxy
// comes up, the Deployment controller writes its status several times
// (condition reasons and times, the revision annotation, ready and
// unavailable counts) in ways Observe reports the same: each was a
// reconcile that wrote nothing. Any other kind, or a pair it cannot read,
// is a change.
func observedSame(oldObj, newObj any) bool {
	o, ok := oldObj.(*appsv1.Deployment)
	n, ok2 := newObj.(*appsv1.Deployment)
	if !ok || !ok2 {
		return false
	}
	if o.Generation != n.Generation || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) || !maps.Equal(o.Labels, n.Labels) {
		return false
	}
	was, is := o.Status, n.Status
	return was.ObservedGeneration == is.ObservedGeneration && was.Replicas == is.Replicas &&
		was.UpdatedReplicas == is.UpdatedReplicas && was.AvailableReplicas == is.AvailableReplicas &&
		stuck(was) == stuck(is)
}

// recording is the client of a Backend with a watch cache: it tells the
// cache of every write, so reads of that object skip the cache until the
// watch delivers it.
type recording struct {
	kube
	w *watchCache
	// create: the writes are the backend's Create's (see byCreate).
	create bool
}

func (r recording) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if r.create {
		r.w.creating(obj)
	}
	err := r.kube.Create(ctx, obj, opts...)
	r.w.answered(err)
	if r.create {
		r.w.created(obj, err)
	}
	if err == nil {
		r.w.wrote(obj, "", false)
	}
	return err
}

func (r recording) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	before := obj.GetResourceVersion()
	err := r.kube.Update(ctx, obj, opts...)
	r.w.answered(err)
	if err == nil {
		r.w.wrote(obj, before, false)
	}
	return err
}

func (r recording) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := r.kube.Delete(ctx, obj, opts...)
	r.w.answered(err)
	if err == nil {
		r.w.wrote(obj, "", true)
	}
	return err
}
