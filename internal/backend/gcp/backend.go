/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"
	"regexp"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"

	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// Defaults of the backend's knobs.
const (
	// DefaultCallTimeout bounds one Compute Engine call. Without a deadline
	// the client retries a 503 on reads for ten minutes.
	DefaultCallTimeout = 30 * time.Second
	// DefaultRetryInterval is how long a failed insert is reported before it
	// is tried again; see epoch.
	DefaultRetryInterval = 5 * time.Minute
)

// IDScheme is the scheme of instance IDs: gce://project/zone/name.
const IDScheme = "gce"

const (
	errFmtProjectID = "project ID %q is not a Google Cloud project ID"
	errHealth       = "cannot list firewall rules to check the credentials and project"
)

// defaultConfigName names the provider config in errors when the backend
// was not told its name.
const defaultConfigName = "the provider config"

// Desired is what the backend is asked to run.
type Desired = backend.Desired[v1alpha1.GCPProxyParameters]

// Observation is what the backend reports.
type Observation = backend.Observation[v1alpha1.GCPProxyObservation]

// Backend runs egress proxies on Compute Engine VMs, each with a static
// external address and a firewall rule, in one project.
type Backend struct {
	project string
	svc     *services
	life    *lifecycle
	timeout time.Duration
	retry   time.Duration
	now     func() time.Time
	// allowedSAs are the service accounts a proxy may attach, as the
	// provider config named config lists them.
	allowedSAs map[string]bool
	// policy is spec.policy.gcp of the provider config (see checkPolicy).
	policy v1alpha1.GCPPolicy
	config string
	// verifier remembers which htpasswd files accept which credentials,
	// so a steady-state Observe costs no bcrypt (~60 ms). One per backend:
	// its memory goes with the provider config it serves.
	verifier *squid.Verifier
	// sums spares Observe rendering the squid configuration.
	sums squid.Sums
	// cache holds the lists Observe reads the parts of proxies from; nil
	// reads every part with its own GET.
	cache   *partsCache
	listTTL time.Duration
}

// An Option configures a Backend.
type Option func(*Backend)

// WithCallTimeout bounds every Compute Engine call.
func WithCallTimeout(d time.Duration) Option {
	return func(b *Backend) {
		if d > 0 {
			b.timeout = d
		}
	}
}

// WithRetryInterval sets how long a failed insert is reported before the
// next attempt.
func WithRetryInterval(d time.Duration) Option {
	return func(b *Backend) {
		if d > 0 {
			b.retry = d
		}
	}
}

// WithAllowedServiceAccounts sets the service accounts a proxy may attach
// to its VM (spec.allowedServiceAccounts and spec.policy.gcp.serviceAccounts
// of the config), and the provider config that lists them (named in
// errors). Without it no service account may be attached.
func WithAllowedServiceAccounts(config string, emails ...string) Option {
	return func(b *Backend) {
		b.config = config
		b.allowedSAs = make(map[string]bool, len(emails))
		for _, e := range emails {
			b.allowedSAs[e] = true
		}
	}
}

// WithListTTL sets how old the shared lists that Observe reads may be (see
// partsCache); 0 or less turns them off, and every Observe reads each part
// of its proxy with a GET.
func WithListTTL(d time.Duration) Option { return func(b *Backend) { b.listTTL = d } }

// WithClock sets the clock that picks retry windows, for tests.
func WithClock(now func() time.Time) Option { return func(b *Backend) { b.now = now } }

// WithVerifier sets the Verifier of htpasswd files, e.g. one shared by the
// backends of a test. By default each Backend has its own.
func WithVerifier(v *squid.Verifier) Option { return func(b *Backend) { b.verifier = v } }

// New returns a Backend for project, whose REST clients are built with
// clientOpts (credentials, endpoint). Close it to release the clients.
func New(ctx context.Context, project string, clientOpts []option.ClientOption, o ...Option) (*Backend, error) {
	if !projectRE().MatchString(project) {
		return nil, backend.Permanent(errors.Errorf(errFmtProjectID, project))
	}
	svc, err := newServices(ctx, clientOpts...)
	if err != nil {
		return nil, backend.Permanent(err)
	}
	return newBackend(project, svc, o...), nil
}

func newBackend(project string, svc *services, o ...Option) *Backend {
	b := &Backend{project: project, svc: svc, life: &lifecycle{close: svc.close}, timeout: DefaultCallTimeout, retry: DefaultRetryInterval, now: time.Now, config: defaultConfigName, verifier: squid.NewVerifier(), listTTL: DefaultListTTL}
	for _, fn := range o {
		fn(b)
	}
	if b.listTTL > 0 {
		b.cache = newPartsCache(b.listTTL)
	}
	return b
}

// Close closes the backend's clients, once no call uses them; calls made
// after Close fail with a Transient error. The factory's cache calls it when
// the provider config or its Secret changes.
func (b *Backend) Close() error { return b.life.shutdown() }

// CheckHealth lists at most one firewall rule: it succeeds when the
// credentials work and the project exists.
func (b *Backend) CheckHealth(ctx context.Context) error {
	if err := b.life.acquire(); err != nil {
		return err
	}
	defer b.life.release()
	ctx, cancel := b.call(ctx)
	defer cancel()
	it := b.svc.firewalls.List(ctx, &computepb.ListFirewallsRequest{Project: b.project, MaxResults: proto.Uint32(1)})
	if _, err := it.Next(); err != nil && !errors.Is(err, iterator.Done) {
		return errors.Wrap(classify(err), errHealth)
	}
	return nil
}

// checkServiceAccount returns a Permanent error when s asks for a service
// account the provider config does not allow (package policy's rule).
func (b *Backend) checkServiceAccount(s spec) error {
	if m := b.rules().ServiceAccountViolation(s.sa); m != "" {
		return backend.Permanent(errors.New(m))
	}
	return nil
}

// call bounds one remote call.
func (b *Backend) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.timeout)
}

// projectRE matches Google Cloud project IDs. The client does not escape
// path values, so only names that cannot change a URL path are sent.
func projectRE() *regexp.Regexp { return regexp.MustCompile(`^[a-z][-a-z0-9]{4,28}[a-z0-9]$`) }
