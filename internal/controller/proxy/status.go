/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"reflect"
	"strconv"
	"sync"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// quietManager hands the managed reconciler a client whose status updates
// are skipped when they would change nothing, and that does not create an
// empty connection Secret. The reconciler of
// crossplane-runtime v2 calls Status().Update after every reconcile, also
// when Observe found the resource as it was: one PUT per resource per poll,
// which the API server answers without writing. Conditions keep their
// LastTransitionTime when nothing else changed (SetConditions), so an
// unchanged resource is equal to the cached one.
type quietManager struct {
	ctrl.Manager
	// kube is the client the quiet one writes through; nil is the
	// manager's.
	kube    client.Client
	written *writtenStatus
	pending *pendingCreates
}

func (m quietManager) GetClient() client.Client {
	kube := m.kube
	if kube == nil {
		kube = m.Manager.GetClient()
	}
	return quietClient{Client: kube, written: m.written, pending: m.pending}
}

type quietClient struct {
	client.Client
	written *writtenStatus
	// pending records the create-pending writes for createResult.
	pending *pendingCreates
}

// Update updates obj, and remembers a create-pending write.
func (c quietClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := c.Client.Update(ctx, obj, opts...)
	if err == nil && c.pending != nil {
		c.pending.wrote(obj)
	}
	return err
}

// Create creates obj, except a connection Secret with no data. The managed
// reconciler publishes the connection details after every Observe, also
// before the instance exists and with nothing to publish: that creates an
// empty Secret, which the first details then patch, two writes where one
// does. The first details now create it; "published" still holds, as
// there was nothing to publish.
func (c quietClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if s, ok := obj.(*corev1.Secret); ok && s.Type == resource.SecretTypeConnection && len(s.Data) == 0 && len(s.StringData) == 0 {
		return nil
	}
	return c.Client.Create(ctx, obj, opts...)
}

// Patch patches obj, except with a patch that gives a connection Secret no
// data. The managed reconciler publishes what Observe returns; Observe
// returns no details when the Secret already has them (External.published),
// and the publisher then sends a merge patch of the Secret's name, type and
// controller only, which the API server would answer without writing.
func (c quietClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if s, ok := obj.(*corev1.Secret); ok && s.Type == resource.SecretTypeConnection && patch.Type() == types.MergePatchType && emptyConnectionPatch(s, patch) {
		return nil
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

// emptyConnectionPatch tells whether patch sets no data of the connection
// Secret current and names the same controller.
func emptyConnectionPatch(current *corev1.Secret, patch client.Patch) bool {
	b, err := patch.Data(current)
	if err != nil {
		return false
	}
	// Only what is compared is decoded: decoding the whole Secret was most
	// of the cost of a steady poll's publishing.
	var want struct {
		Metadata struct {
			OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		} `json:"metadata"`
		Data       map[string]json.RawMessage `json:"data"`
		StringData map[string]json.RawMessage `json:"stringData"`
		Type       corev1.SecretType          `json:"type"`
	}
	if err := json.Unmarshal(b, &want); err != nil {
		return false
	}
	have, set := metav1.GetControllerOf(current), controllerRef(want.Metadata.OwnerReferences)
	return len(want.Data) == 0 && len(want.StringData) == 0 && have != nil && set != nil && have.UID == set.UID &&
		(want.Type == "" || want.Type == current.Type)
}

// controllerRef is the controller among refs, as metav1.GetControllerOf
// finds it on an object.
func controllerRef(refs []metav1.OwnerReference) *metav1.OwnerReference {
	for i := range refs {
		if c := refs[i].Controller; c != nil && *c {
			return &refs[i]
		}
	}
	return nil
}

func (c quietClient) Status() client.SubResourceWriter {
	return quietStatus{SubResourceWriter: c.Client.Status(), reader: c.Client, written: c.written}
}

type quietStatus struct {
	client.SubResourceWriter
	reader  client.Reader
	written *writtenStatus
}

// Update updates the status of obj unless the newest version of obj the
// provider knows of (the manager's cache, or its own last status write when
// the cache has not seen that yet) already has that status.
func (s quietStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if len(opts) == 0 && s.unchanged(ctx, obj) {
		return nil
	}
	err := s.SubResourceWriter.Update(ctx, obj, opts...)
	if err == nil && s.written != nil {
		s.written.wrote(obj)
	}
	return err
}

func (s quietStatus) unchanged(ctx context.Context, obj client.Object) bool {
	t := reflect.TypeOf(obj)
	if t.Kind() != reflect.Pointer {
		return false
	}
	cached, ok := reflect.New(t.Elem()).Interface().(client.Object)
	// Only read: the cache's own object needs no copy.
	if !ok || s.reader.Get(ctx, client.ObjectKeyFromObject(obj), cached, client.UnsafeDisableDeepCopy) != nil {
		return false
	}
	if s.written != nil {
		// The cache has not seen the last write yet: that write is the
		// newest version, and a reconcile that read the older one (a
		// requeue right after a write, or a change of the instance) and
		// computed the same status need not write it again.
		if sum, newer := s.written.newer(cached); newer {
			want, ok := statusSum(obj)
			return ok && sum == want
		}
	}
	// The common case, a poll that changed nothing: cheap.
	// reflect.DeepEqual first: much faster, and enough when nothing
	// changed at all.
	if cached.GetResourceVersion() == obj.GetResourceVersion() && (reflect.DeepEqual(cached, obj) || equality.Semantic.DeepEqual(cached, obj)) {
		return true
	}
	// A reconcile that read an older version (queued before the cache saw
	// the last write) and found the instance as the cache's status says:
	// its write, based on that older version, would only fail with a
	// conflict, to be retried for nothing.
	want, ok := statusSum(obj)
	if !ok {
		return false
	}
	have, ok := statusSum(cached)
	return ok && have == want
}

// statusSum is a digest of obj's status without the conditions' transition
// times: a condition set again on an older copy gets a new time, but says
// nothing new.
func statusSum(obj client.Object) ([sha256.Size]byte, bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return [sha256.Size]byte{}, false
	}
	st := v.Elem().FieldByName("Status")
	if !st.IsValid() {
		return [sha256.Size]byte{}, false
	}
	cp := reflect.New(st.Type()).Elem()
	cp.Set(st)
	if c := cp.FieldByName("Conditions"); c.IsValid() && c.Kind() == reflect.Slice {
		if conds, ok := c.Interface().([]xpv2.Condition); ok {
			norm := make([]xpv2.Condition, len(conds))
			for i, cd := range conds {
				cd.LastTransitionTime = metav1.Time{}
				norm[i] = cd
			}
			c.Set(reflect.ValueOf(norm))
		}
	}
	b, err := json.Marshal(cp.Interface())
	if err != nil {
		return [sha256.Size]byte{}, false
	}
	return sha256.Sum256(b), true
}

// maxWritten bounds the writes remembered: they are forgotten as soon as the
// cache has seen them, so only those of deleted resources pile up.
const maxWritten = 4096

// makeRoom drops any one entry of m when it holds maxWritten and uid is not
// among them: the provider's write memories are hints, each forgotten one
// costs at most a request, and a map per resource must not grow for ever.
func makeRoom[V any](m map[types.UID]V, uid types.UID) {
	if _, known := m[uid]; known || len(m) < maxWritten {
		return
	}
	for k := range m {
		delete(m, k)
		return
	}
}

// writtenStatus remembers the provider's last status write of each
// resource until the cache has seen it.
type writtenStatus struct {
	mu   sync.Mutex
	last map[types.UID]written
}

type written struct {
	resourceVersion string
	sum             [sha256.Size]byte
}

func newWrittenStatus() *writtenStatus {
	return &writtenStatus{last: map[types.UID]written{}}
}

func (w *writtenStatus) wrote(obj client.Object) {
	sum, ok := statusSum(obj)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// The write of a deleted resource is never seen. A dropped write costs
	// at most one write that was not needed.
	makeRoom(w.last, obj.GetUID())
	w.last[obj.GetUID()] = written{resourceVersion: obj.GetResourceVersion(), sum: sum}
}

// newer returns the status digest of the last write of cached's resource
// when the cache has not seen that write yet; once it has, the write is
// forgotten.
func (w *writtenStatus) newer(cached client.Object) ([sha256.Size]byte, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, ok := w.last[cached.GetUID()]
	if !ok {
		return [sha256.Size]byte{}, false
	}
	if atLeast(cached.GetResourceVersion(), l.resourceVersion) {
		delete(w.last, cached.GetUID())
		return [sha256.Size]byte{}, false
	}
	return l.sum, true
}

// atLeast tells whether resource version have is at least want. Resource
// versions are opaque, but etcd's are increasing integers; one that is not
// counts as caught up, so the cache is believed.
func atLeast(have, want string) bool {
	h, err1 := strconv.ParseUint(have, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	return err1 != nil || err2 != nil || h >= w
}
