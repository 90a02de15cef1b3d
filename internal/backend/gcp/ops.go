/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// maxStaleReplays bounds how many earlier, successful inserts with the same
// request ID an insert steps over in one call (see insert).
const maxStaleReplays = 4

const (
	errFmtStaleReplays = "the insert of %s keeps replaying earlier operations; trying again later"
)

// send starts a mutation with a request ID.
type send func(ctx context.Context, requestID string) (*compute.Operation, error)

// insert sends an insert whose request ID is derived from seed, and reports
// how its operation went, without waiting for it:
//
//   - not done yet: nil; the next Observe sees the resource.
//   - done with an error (now, or when an earlier insert of this retry window
//     failed and GCE replays its operation): that error, classified. Nothing
//     is inserted again until the next window, so a quota failure costs one
//     real insert per window whatever the reconcile rate.
//   - done without error but the resource is missing: the operation is a
//     replay of an insert whose resource was deleted since (a replaced VM).
//     The insert is sent again under a request ID derived from that
//     operation, which is just as deterministic.
//
// Errors of the call itself are returned unclassified, for the caller to
// adopt on alreadyExists.
func (b *Backend) insert(ctx context.Context, what string, fn send, exists func(context.Context) (bool, error), seed ...string) error {
	rid := requestID(seed...)
	for range maxStaleReplays {
		op, err := b.sendOp(ctx, fn, rid)
		if err != nil {
			return err
		}
		if op.GetStatus() != computepb.Operation_DONE {
			return nil
		}
		if err := operationError(what, op); err != nil {
			return err
		}
		ok, err := exists(ctx)
		if err != nil || ok {
			return err
		}
		rid = requestID(rid, op.GetName())
	}
	return backend.Transient(errors.Errorf(errFmtStaleReplays, what))
}

// remove sends a delete with a request ID derived from seed, which holds the
// resource's numeric ID: a repeated delete of the same resource replays its
// operation instead of failing with resourceNotReady. It reports whether
// the resource is gone: a missing resource is, and so is one whose delete
// operation is done.
func (b *Backend) remove(ctx context.Context, what string, fn send, seed ...string) (bool, error) {
	op, err := b.sendOp(ctx, fn, requestID(seed...))
	if isNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, classify(err)
	}
	if err := operationError(what, op); err != nil {
		return false, err
	}
	return op.GetStatus() == computepb.Operation_DONE, nil
}

// sendOp sends a mutation and, when its operation is not done, polls it
// once: a quick failure (most quota errors) is then reported at once. It
// returns the latest operation.
func (b *Backend) sendOp(ctx context.Context, fn send, rid string) (*computepb.Operation, error) {
	cctx, cancel := b.call(ctx)
	defer cancel()
	op, err := fn(cctx, rid)
	if err != nil {
		return nil, err
	}
	if !op.Done() {
		// Poll returns an error for an operation with httpErrorStatusCode,
		// after it stored it: the operation's own error is read below. Any
		// other poll error only means "not known yet".
		_ = op.Poll(cctx)
	}
	return op.Proto(), nil
}
