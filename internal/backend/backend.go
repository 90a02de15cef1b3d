/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package backend

import (
	"context"
	"time"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// Credentials are the proxy's basic-auth credentials. They never appear in
// an error, a log line, an event or a status.
type Credentials struct {
	Username string
	Password string
	// Generated says the provider generated Password: a long random
	// secret (see HtpasswdCost), not one a person chose.
	Generated bool
}

// Desired is everything a backend needs to build, check or delete one
// instance. P holds the backend's own parameters (the forProvider block).
type Desired[P any] struct {
	// Name is the deterministic backend name of the instance (see Name).
	Name string
	// Ownership is written to the instance's labels and read back.
	Ownership Ownership
	// Proxy is what the proxy allows.
	Proxy commonv1alpha1.ProxyParameters
	// AllowedPrivateDestinations are the private networks the policy of
	// the provider config lets a proxy reach (spec.policy
	// allowedPrivateDestinations). With denyPrivateDestinations false,
	// squid refuses every other private address, whatever a name resolves
	// to.
	AllowedPrivateDestinations []string
	// Credentials the proxy accepts.
	Credentials Credentials
	// Params are the backend's own parameters.
	Params P
}

// Observation is what a backend reports about an instance. O holds the
// backend's own observed fields.
type Observation[O any] struct {
	// ID is the self-contained instance ID (see FormatID).
	ID string
	// State of the instance. Stopped and Terminated instances are replaced.
	State commonv1alpha1.InstanceState
	// Ready is true when the proxy serves: running, with an endpoint.
	Ready bool
	// Message says why the instance is not ready, or how ready it is.
	Message string
	// Creating is true while a new instance is still coming up and
	// nothing is known to be wrong: its resource keeps the status Create
	// gave it, which saves a status write per new proxy. A backend sets it
	// only for a bounded time after creation, so a proxy that never comes
	// up does show the Message.
	Creating bool
	// Endpoint clients use, host:port.
	Endpoint string
	// EgressIPs are the addresses traffic leaves from.
	EgressIPs []string
	// CreatedAt is read back from the backend, never remembered locally.
	CreatedAt time.Time
	// Ownership is read back from the instance's labels.
	Ownership Ownership
	// UpToDate is false when the instance differs from Desired.
	UpToDate bool
	// Diff says what differs, for debug logs. It holds no secret.
	Diff string
	// ConfigChecksum of the proxy configuration the instance runs.
	ConfigChecksum string
	// Traffic is what the proxy served since its squid started, nil when
	// the backend could not read it cheaply on this poll (never an error).
	Traffic *squid.Traffic
	// TrafficAt is when Traffic was read on the instance.
	TrafficAt time.Time
	// Extra holds the backend's own observed fields.
	Extra O
}

// Instance is one instance found by List.
type Instance struct {
	// ID is the self-contained instance ID.
	ID string
	// Name is the backend name of the instance.
	Name string
	// Ownership is read from the instance's labels.
	Ownership Ownership
	// CreatedAt is read back from the backend.
	CreatedAt time.Time
	// State of the instance.
	State commonv1alpha1.InstanceState
}

// Backend provisions egress proxy instances. Every method honours ctx: it
// returns when ctx is done, and bounds every remote call by it. Errors are
// classified with NotFound, Quota, Transient or Permanent; an unclassified
// error counts as Transient.
type Backend[P, O any] interface {
	// Observe reports the instance d describes. It returns an error of
	// ClassNotFound when the instance does not exist, and never changes the
	// instance. It reports UpToDate false when any part of the instance
	// differs from d, and reads ID, CreatedAt and Ownership back from the
	// backend.
	Observe(ctx context.Context, d Desired[P]) (Observation[O], error)

	// Create starts creating the instance and returns without waiting for
	// it to run. It is idempotent and crash-safe: called again after a
	// crash between any two of its steps, it finishes the work without
	// duplicating anything. It adopts a part that already exists only when
	// the part's ownership labels match d.Ownership; otherwise it returns a
	// Permanent error.
	Create(ctx context.Context, d Desired[P]) error

	// Update makes an existing instance match d, repairing drift (a deleted
	// part is re-created, a changed one reset).
	Update(ctx context.Context, d Desired[P]) error

	// Delete starts deleting everything the instance is made of, and returns
	// nil when nothing is left to ask for. It is idempotent: deleting a
	// missing instance succeeds. It works with only d.Name and d.Ownership
	// set, so the garbage collector can delete what List found. Observe
	// reports the instance gone only once every part is gone.
	Delete(ctx context.Context, d Desired[P]) error

	// List returns every instance carrying this provider's managed-by
	// label, for garbage collection. It fails as a whole rather than return
	// a partial list, so that a missing instance is never taken for gone.
	List(ctx context.Context) ([]Instance, error)
}

// HealthChecker is implemented by backends that can tell whether the
// backend behind one provider config is usable.
type HealthChecker interface {
	// CheckHealth returns nil when the backend answers and the credentials
	// work, or a classified error saying what is wrong.
	CheckHealth(ctx context.Context) error
}

// Watcher is implemented by backends that see changes to their instances as
// they happen (the kubernetes backend watches the target cluster), so that
// the controller reconciles a changed or damaged instance at once rather
// than at its next poll, and the poll can be long.
type Watcher interface {
	// Watch makes fn be called with the ownership of every instance one of
	// whose parts changed or was deleted; a later call replaces fn. fn must
	// not block.
	Watch(fn func(Ownership))
}
