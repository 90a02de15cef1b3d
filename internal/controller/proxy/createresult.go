/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"sync"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// createResult saves the critical annotations of a proxy resource as
// crossplane-runtime does, except the create-succeeded annotation alone.
// The managed reconciler writes it after every successful Create so that
// the next reconcile knows the Create finished; a proxy's reconciler
// proceeds without knowing (WithDeterministicExternalName: Observe finds
// the instance by its name, and Create is idempotent), and the external
// name it would save was saved with create-pending, before Create
// (NameInitializer). So that write, one per new proxy, carries nothing the
// reconciler reads. create-failed and a changed external name are saved.
type createResult struct {
	managed.CriticalAnnotationUpdater
	pending *pendingCreates
}

func (u createResult) UpdateCriticalAnnotations(ctx context.Context, o client.Object) error {
	if u.pending.onlySucceeded(o) {
		return nil
	}
	return u.CriticalAnnotationUpdater.UpdateCriticalAnnotations(ctx, o)
}

// createKeys are the critical annotations the create-pending write saved
// and the create-succeeded write would save again.
var createKeys = []string{meta.AnnotationKeyExternalName, meta.AnnotationKeyExternalCreatePending, meta.AnnotationKeyExternalCreateFailed}

// pendingCreates remembers the critical annotations of each resource as its
// create-pending write saved them, until the result of that Create.
type pendingCreates struct {
	mu    sync.Mutex
	saved map[types.UID]map[string]string
}

func newPendingCreates() *pendingCreates {
	return &pendingCreates{saved: map[types.UID]map[string]string{}}
}

// wrote records o as saved, when it is a create-pending write.
func (p *pendingCreates) wrote(o client.Object) {
	a := o.GetAnnotations()
	if a[meta.AnnotationKeyExternalCreatePending] == "" {
		return
	}
	s := make(map[string]string, len(createKeys))
	for _, k := range createKeys {
		s[k] = a[k]
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// A Create that never returned (the process is still here, so it timed
	// out) leaves its entry. A dropped entry costs one write that was not
	// needed.
	makeRoom(p.saved, o.GetUID())
	p.saved[o.GetUID()] = s
}

// onlySucceeded tells whether o differs from its create-pending write only
// by a create-succeeded annotation, and forgets that write.
func (p *pendingCreates) onlySucceeded(o client.Object) bool {
	a := o.GetAnnotations()
	if a[meta.AnnotationKeyExternalCreateSucceeded] == "" {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.saved[o.GetUID()]
	if !ok {
		return false
	}
	delete(p.saved, o.GetUID())
	for _, k := range createKeys {
		if s[k] != a[k] {
			return false
		}
	}
	return true
}
