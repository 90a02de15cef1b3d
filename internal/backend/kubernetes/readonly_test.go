/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// sharingCache answers reads that ask for no copy as controller-runtime's
// cache does: with a shallow copy of the object it holds, whose maps and
// slices are the cache's own. It remembers what it handed out, to check
// that nobody changed it.
type sharingCache struct {
	held, snapshot map[string]runtime.Object
	copied         int
}

func unsafeRead(uncopied *bool) bool { return uncopied != nil && *uncopied }

func (s *sharingCache) funcs() interceptor.Funcs {
	share := func(k string, obj runtime.Object, read func(runtime.Object) error) error {
		held, ok := s.held[k]
		if !ok {
			held = obj.DeepCopyObject()
			if err := read(held); err != nil {
				return err
			}
			s.held[k], s.snapshot[k] = held, held.DeepCopyObject()
		}
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(held).Elem())
		return nil
	}
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			o := &client.GetOptions{}
			o.ApplyOptions(opts)
			if !unsafeRead(o.UnsafeDisableDeepCopy) {
				s.copied++
				return c.Get(ctx, key, obj, opts...)
			}
			return share(fmt.Sprintf("%T %s", obj, key), obj, func(h runtime.Object) error {
				return c.Get(ctx, key, h.(client.Object)) //nolint:forcetypeassert // A copy of a client.Object.
			})
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			o := &client.ListOptions{}
			o.ApplyOptions(opts)
			if !unsafeRead(o.UnsafeDisableDeepCopy) {
				s.copied++
				return c.List(ctx, list, opts...)
			}
			return share(fmt.Sprintf("%T %v", list, o), list, func(h runtime.Object) error {
				return c.List(ctx, h.(client.ObjectList), opts...) //nolint:forcetypeassert // A copy of a client.ObjectList.
			})
		},
	}
}

// TestObserveReadsUncopied shows that Observe reads every object without a
// copy and changes none of what it reads, so reading the watch cache's own
// objects is safe.
func TestObserveReadsUncopied(t *testing.T) {
	d := desired()
	s := &sharingCache{held: map[string]runtime.Object{}, snapshot: map[string]runtime.Object{}}
	c := failing(t, s.funcs())
	if err := New(c).Create(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	for _, m := range []mutation{available(1), node("node-a", "203.0.113.7"), runningPod("pod-a", "node-a", true)} {
		m(t, c)
	}
	s.copied = 0
	o, err := New(c).Observe(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	if !o.Ready || len(o.EgressIPs) != 1 {
		t.Fatalf("Observe: not ready with one egress IP, so not every read was made: %+v", o)
	}
	if s.copied != 0 {
		t.Errorf("Observe read %d times with a copy, want none", s.copied)
	}
	if len(s.held) < 6 {
		t.Errorf("Observe read %d objects and lists without a copy, want every part, the pods and the node", len(s.held))
	}
	for k, h := range s.held {
		if diff := cmp.Diff(s.snapshot[k], h); diff != "" {
			t.Errorf("Observe changed the cached %s: -before, +after:\n%s", k, diff)
		}
	}
}
