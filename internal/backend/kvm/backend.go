/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"io"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/dialer"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/kvmdesc"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// IDScheme is the scheme of instance IDs: libvirt://POOL/NAME.
const IDScheme = "libvirt"

const (
	errFmtName = "instance name %q must be 1 to %d letters, digits, '.', '_' or '-'"
	// errFmtExternalName names the annotation because it is the only way a
	// name other than the derived one reaches the backend.
	errFmtExternalName = "instance name %q is not %q, the name derived from this resource: the crossplane.io/external-name annotation must be unset or equal to it; the kvm backend creates, adopts and deletes no other domain or volume"
	errHealth          = "libvirt does not answer"
)

// Desired is what the controller asks of the backend.
type Desired = backend.Desired[v1alpha1.KVMProxyParameters]

// Observation is what the backend reports.
type Observation = backend.Observation[v1alpha1.KVMProxyObservation]

// Backend runs egress proxies as libvirt domains: an overlay volume of a
// base image, a NoCloud seed ISO volume and a domain, per instance.
// Everything it decides on is read back from libvirt, and ownership lives
// in the domain's <metadata>; it only remembers, for a while, the MACs and
// disks of other domains (macIndex) and what it verified of running ones
// (verifiedDomains).
type Backend struct {
	svc      service
	closer   io.Closer
	userData UserDataSource
	boot     []string
	now      func() time.Time
	// probe makes Ready mean "squid serves" (WithServeProbe).
	probe bool
	// afterStep lets tests simulate a crash after a step of Create.
	afterStep func(step string) error
	// verifier remembers which htpasswd files accept which credentials,
	// so a steady-state Observe costs no bcrypt (~60 ms). One per backend:
	// its memory goes with the provider config it serves.
	verifier *squid.Verifier
	// sums spares Observe rendering the squid configuration.
	sums squid.Sums
	// macs are the NIC MACs and disks of the host's domains, for checkHost.
	macs macIndex
	// verified is what full Observes found of running domains (see
	// observeVerified), trusted for verifyEvery.
	verified    verifiedDomains
	verifyEvery time.Duration
	// policy is what the platform allows this config's proxies.
	policy Policy
}

// An Option configures a Backend.
type Option func(*Backend)

// WithUserDataSource lets the backend read the Secrets userDataSecretRef
// selects. Without it such resources fail with a Permanent error.
func WithUserDataSource(s UserDataSource) Option {
	return func(b *Backend) { b.userData = s }
}

// WithBootDevices sets the boot order of new domains (libvirt <boot dev>
// values). Production boots from the disk only; tests with an empty base
// image boot from the network first, so iPXE gets a DHCP lease.
func WithBootDevices(devs ...string) Option {
	return func(b *Backend) { b.boot = devs }
}

// WithClock sets the clock creation times are read from.
func WithClock(now func() time.Time) Option {
	return func(b *Backend) { b.now = now }
}

// WithVerifyInterval sets how long a steady-state Observe trusts what it
// last verified of a running domain (DefaultVerifyInterval); 0 or less
// verifies everything at every Observe.
func WithVerifyInterval(d time.Duration) Option {
	return func(b *Backend) { b.verifyEvery = d }
}

// WithVerifier sets the Verifier of htpasswd files, e.g. one shared by the
// backends of a test. By default each Backend has its own.
func WithVerifier(v *squid.Verifier) Option {
	return func(b *Backend) { b.verifier = v }
}

// New returns a backend for the libvirt daemon t names. It does not dial:
// the connection is made by the first call, bounded by its context, and
// made again whenever it breaks. Errors are Permanent: t must change.
func New(t dialer.Target, opts ...Option) (*Backend, error) {
	d, uri, err := dialer.New(t)
	if err != nil {
		return nil, err
	}
	c := NewConn(d, uri)
	return newBackend(rpc{c: c}, c, opts...), nil
}

func newBackend(svc service, closer io.Closer, opts ...Option) *Backend {
	b := &Backend{svc: svc, closer: closer, boot: []string{bootDisk}, now: time.Now, verifier: squid.NewVerifier(), verifyEvery: DefaultVerifyInterval}
	for _, o := range opts {
		o(b)
	}
	return b
}

// Close closes the pooled connection.
func (b *Backend) Close() error {
	if b.closer == nil {
		return nil
	}
	return b.closer.Close()
}

// CheckHealth dials if needed and asks the daemon for its driver type.
func (b *Backend) CheckHealth(ctx context.Context) error {
	_, err := b.svc.Driver(ctx)
	return classify(errors.Wrap(err, errHealth))
}

// FormatInstanceID returns the ID of the instance name in pool.
func FormatInstanceID(pool, name string) string { return backend.FormatID(IDScheme, pool, name) }

// ParseInstanceID returns the pool and name of an instance ID. A malformed ID
// is a Permanent error.
func ParseInstanceID(id string) (pool, name string, err error) {
	parts, err := backend.ParseID(id, IDScheme, "pool", "name")
	if err != nil {
		return "", "", err
	}
	if err := checkName(parts[1]); err != nil {
		return "", "", err
	}
	return parts[0], parts[1], nil
}

// checkDesired refuses any name but the one derived from d's owner. The
// volumes are named after the instance, so a free choice of name would let
// a resource reach any volume of the pool (an external name of "base" makes
// the overlay's name that of the base image).
func checkDesired(d Desired) error {
	if err := checkName(d.Name); err != nil {
		return err
	}
	if want := backend.Name(d.Ownership.Owner, kvmdesc.Backend.MaxNameLength); d.Name != want {
		return backend.Permanent(errors.Errorf(errFmtExternalName, d.Name, want))
	}
	return nil
}

// checkName refuses names libvirt would misread: a volume name holds no
// '/', and the names stay short enough for the volume suffixes.
func checkName(name string) error {
	if len(name) == 0 || len(name) > kvmdesc.Backend.MaxNameLength || !validName(name) {
		return backend.Permanent(errors.Errorf(errFmtName, name, kvmdesc.Backend.MaxNameLength))
	}
	return nil
}

// validName matches ^[A-Za-z0-9][-_.A-Za-z0-9]*$, as the API's patterns.
func validName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !alnum && (i == 0 || (c != '-' && c != '_' && c != '.')) {
			return false
		}
	}
	return true
}

// step marks the end of a step of Create, for crash tests.
func (b *Backend) step(name string) error {
	if b.afterStep == nil {
		return nil
	}
	return b.afterStep(name)
}
