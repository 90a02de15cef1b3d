package gcpfake

import (
	"context"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"google.golang.org/api/option"
)

const (
	errListen   = "cannot listen"
	errShutdown = "cannot shut the server down"
)

// DefaultZones returns the zones a Server knows when WithZones is not given.
// Real GCE has many more; an aggregatedList reports every known zone, so a
// short list keeps responses readable.
func DefaultZones() []string {
	return []string{
		"us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f",
		"europe-west1-b", "europe-west1-c", "europe-west1-d",
	}
}

type config struct {
	address             string
	projects            map[string]bool
	zones               []string
	regions             map[string]bool
	opPolls             int
	bootProvisioning    int
	bootStaging         int
	clock               func() time.Time
	requireAuth         bool
	strictAddressDelete bool
	staticRange         string
}

// An Option configures a Server.
type Option func(*config)

// WithAddress sets the listen address Start uses (default 127.0.0.1:0).
func WithAddress(addr string) Option { return func(c *config) { c.address = addr } }

// WithProjects restricts the projects the fake serves; calls for any other
// project get 404 notFound, as a project that does not exist does. By default
// every project exists.
func WithProjects(p ...string) Option {
	return func(c *config) {
		for _, name := range p {
			if name != "" {
				c.projects[name] = true
			}
		}
	}
}

// WithZones replaces the zones the fake knows. Regions are derived from them
// (us-central1-a is in us-central1).
func WithZones(z ...string) Option {
	return func(c *config) {
		c.zones = nil
		for _, name := range z {
			if name != "" {
				c.zones = append(c.zones, name)
			}
		}
	}
}

// WithOperationPolls sets how many observations (an operation GET or a GET of
// its target) an operation needs before it is DONE. 0 makes every operation
// DONE in the response to the call that started it. Default 1, which keeps
// op.Wait free of its 1 s backoff sleep.
func WithOperationPolls(n int) Option { return func(c *config) { c.opPolls = max(n, 0) } }

// WithInstanceBoot sets how many observations a new instance spends in
// PROVISIONING and then STAGING before it is RUNNING. Observations are GETs of
// the instance and polls of its insert operation. Default 1, 1.
func WithInstanceBoot(provisioning, staging int) Option {
	return func(c *config) { c.bootProvisioning, c.bootStaging = max(provisioning, 0), max(staging, 0) }
}

// WithClock sets the clock used for timestamps and fault durations.
func WithClock(now func() time.Time) Option { return func(c *config) { c.clock = now } }

// WithRequireAuth makes every compute call need "Authorization: Bearer T"
// where T was issued by the fake's token endpoint or added with
// AddAccessToken; other calls get 401, so the credentials path is exercised.
func WithRequireAuth() Option { return func(c *config) { c.requireAuth = true } }

// WithStrictAddressDelete makes deleting an IN_USE address fail with 400
// resourceInUseByAnotherResource. Whether real GCE does this is unverified
// (see doc.go), so it is off by default.
func WithStrictAddressDelete() Option { return func(c *config) { c.strictAddressDelete = true } }

// WithStaticAddressRange reserves addresses without an explicit IP from
// prefix instead of 203.0.113.0/24, whose 253 addresses a bench of more
// proxies exhausts. Take it from a range no real host has, such as
// 198.18.0.0/15 (RFC 2544, benchmarking).
func WithStaticAddressRange(prefix string) Option {
	return func(c *config) { c.staticRange = prefix }
}

// Server is a fake of the Compute Engine v1 REST API. It is an http.Handler;
// Start serves it on a loopback listener. All methods are safe for concurrent
// use.
type Server struct {
	cfg    config
	mu     sync.Mutex // guards cfg.opPolls, st and waiters
	st     *store
	faults *faultSet
	calls  *callCounter
	auth   *authority
	v      *validators
	mux    *http.ServeMux

	srv *http.Server
	url string
	// closing is closed when the server stops, which ends the metadata
	// server's pending wait_for_change requests.
	closing   chan struct{}
	closeOnce sync.Once
	// waiters counts pending wait_for_change requests (tests read it).
	waiters int
}

// New returns a Server that is not yet listening.
func New(opts ...Option) *Server {
	c := config{
		address:          "127.0.0.1:0",
		projects:         map[string]bool{},
		zones:            DefaultZones(),
		opPolls:          1,
		bootProvisioning: 1,
		bootStaging:      1,
		clock:            time.Now,
		staticRange:      staticRange,
	}
	for _, o := range opts {
		o(&c)
	}
	c.regions = map[string]bool{}
	for _, z := range c.zones {
		c.regions[regionOf(z)] = true
	}
	s := &Server{cfg: c, st: newStore(c.staticRange), faults: newFaultSet(c.clock), calls: newCallCounter(), auth: newAuthority(c.clock), v: newValidators(), closing: make(chan struct{})}
	s.mux = s.routes()
	return s
}

// Start listens on the configured address and serves in the background.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.address)
	if err != nil {
		return errors.Wrap(err, errListen)
	}
	s.url = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return nil
}

// URL returns the base URL, e.g. http://127.0.0.1:41234. Empty before Start.
func (s *Server) URL() string { return s.url }

// Close stops the server and drops open connections.
func (s *Server) Close() {
	s.stopWaiters()
	if s.srv != nil {
		_ = s.srv.Close()
	}
}

// Shutdown stops the server gracefully.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopWaiters() // Shutdown waits for handlers: long polls must end first
	if s.srv == nil {
		return nil
	}
	return errors.Wrap(s.srv.Shutdown(ctx), errShutdown)
}

// stopWaiters ends every pending wait_for_change.
func (s *Server) stopWaiters() { s.closeOnce.Do(func() { close(s.closing) }) }

// ClientOptions returns the options that point a compute REST client at the
// fake without credentials.
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{option.WithEndpoint(s.url), option.WithoutAuthentication()}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// SetOperationPolls changes, for operations started from now on, how many
// observations they need before they are DONE.
func (s *Server) SetOperationPolls(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.opPolls = max(n, 0)
}

// Zones returns the zones the fake knows, sorted.
func (s *Server) Zones() []string {
	z := append([]string(nil), s.cfg.zones...)
	sort.Strings(z)
	return z
}

func (s *Server) projectKnown(p string) bool {
	return len(s.cfg.projects) == 0 || s.cfg.projects[p]
}

func (s *Server) checkProject(p string) *apiError {
	if !s.projectKnown(p) {
		return errNotFound("projects/" + p)
	}
	return nil
}

func (s *Server) checkZone(p, z string) *apiError {
	if e := s.checkProject(p); e != nil {
		return e
	}
	for _, known := range s.cfg.zones {
		if known == z {
			return nil
		}
	}
	return errNotFound("projects/" + p + "/zones/" + z)
}

func (s *Server) checkRegion(p, r string) *apiError {
	if e := s.checkProject(p); e != nil {
		return e
	}
	if !s.cfg.regions[r] {
		return errNotFound("projects/" + p + "/regions/" + r)
	}
	return nil
}

// regionOf returns the region of a zone: us-central1-a is in us-central1.
func regionOf(zone string) string {
	if i := strings.LastIndex(zone, "-"); i > 0 {
		return zone[:i]
	}
	return zone
}
