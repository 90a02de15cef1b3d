/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package backend

import "context"

// Fns is a Backend made of functions, for tests: a fake is a struct literal.
// Calling a method whose function is nil panics with the method's name, as
// crossplane-runtime's fakes do: a fake that silently succeeded would let a
// test pass on a call it never expected.
type Fns[P, O any] struct {
	ObserveFn func(ctx context.Context, d Desired[P]) (Observation[O], error)
	CreateFn  func(ctx context.Context, d Desired[P]) error
	UpdateFn  func(ctx context.Context, d Desired[P]) error
	DeleteFn  func(ctx context.Context, d Desired[P]) error
	ListFn    func(ctx context.Context) ([]Instance, error)
}

func unexpected(method string) {
	panic("backend.Fns: " + method + " was called but " + method + "Fn is nil")
}

// Observe calls ObserveFn.
func (f Fns[P, O]) Observe(ctx context.Context, d Desired[P]) (Observation[O], error) {
	if f.ObserveFn == nil {
		unexpected("Observe")
	}
	return f.ObserveFn(ctx, d)
}

// Create calls CreateFn.
func (f Fns[P, O]) Create(ctx context.Context, d Desired[P]) error {
	if f.CreateFn == nil {
		unexpected("Create")
	}
	return f.CreateFn(ctx, d)
}

// Update calls UpdateFn.
func (f Fns[P, O]) Update(ctx context.Context, d Desired[P]) error {
	if f.UpdateFn == nil {
		unexpected("Update")
	}
	return f.UpdateFn(ctx, d)
}

// Delete calls DeleteFn.
func (f Fns[P, O]) Delete(ctx context.Context, d Desired[P]) error {
	if f.DeleteFn == nil {
		unexpected("Delete")
	}
	return f.DeleteFn(ctx, d)
}

// List calls ListFn.
func (f Fns[P, O]) List(ctx context.Context) ([]Instance, error) {
	if f.ListFn == nil {
		unexpected("List")
	}
	return f.ListFn(ctx)
}
