/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

const (
	errFmtUnreachable = "the target cluster is unreachable since %s; its last known state is not reported"
	errProbe          = "cannot build the liveness check of the target cluster"
)

const (
	// liveInterval bounds how often Observe asks the target API server
	// whether it answers: one request per target per interval, shared by
	// all of its resources. An informer retries a refused connection
	// quietly and keeps serving its last state, so without this check a
	// proxy that broke during an outage would show only when the watches
	// come back.
	liveInterval = 10 * time.Second
	// liveTimeout bounds one check; a cut that drops packets answers never.
	liveTimeout = 5 * time.Second
	// catchUp is how long after an outage reads go to the API server: a
	// reflector backs off up to 30 s (jittered up to twice that) before it
	// watches again, and nothing tells when it did. The watch cache cuts it
	// short by replacing its informers (see watchCache.restart).
	catchUp = time.Minute
)

// liveness tells whether the watch cache of a target can be vouched for: it
// cannot while the target's API server does not answer, nor for catchUp
// after it answers again.
type liveness struct {
	probe    func(ctx context.Context) error
	now      func() time.Time
	interval time.Duration
	catchUp  time.Duration

	mu       sync.Mutex
	checked  time.Time // start of the last check
	checking bool
	down     time.Time // first failed check or watch; zero while reachable
	cause    error
	back     time.Time // when it answered again after an outage

	// onBack, if set, is called in a goroutine of its own when a check
	// finds the target answering again after an outage.
	onBack func()
}

func newLiveness(probe func(ctx context.Context) error) *liveness {
	return &liveness{probe: probe, now: time.Now, interval: liveInterval, catchUp: catchUp}
}

// check returns a Transient error while the target is unreachable. It asks
// the target at most once per interval; callers in between, or while a
// check runs, get the last answer.
func (l *liveness) check(ctx context.Context) error {
	l.mu.Lock()
	now := l.now()
	if l.checking || (!l.checked.IsZero() && now.Sub(l.checked) < l.interval) {
		defer l.mu.Unlock()
		return l.err()
	}
	l.checking, l.checked = true, now
	l.mu.Unlock()

	pctx, cancel := context.WithTimeout(ctx, liveTimeout)
	err := l.probe(pctx)
	cancel()

	l.mu.Lock()
	defer l.mu.Unlock()
	l.checking = false
	if err != nil && ctx.Err() != nil {
		// The caller gave up, which says nothing of the target: let the
		// next caller check.
		l.checked = time.Time{}
		return backend.Transient(ctx.Err())
	}
	wasDown := !l.down.IsZero()
	l.record(err)
	if wasDown && l.down.IsZero() && l.onBack != nil {
		go l.onBack()
	}
	return l.err()
}

// answered records that the target answered a request of the backend,
// which vouches for it as a check would, unless it is down (only a check
// ends an outage, and starts the catch-up). A backend creating proxies
// writes to the target many times an interval: it then sends no check,
// which were ~0.04 requests per proxy while 1000 converged.
func (l *liveness) answered() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down.IsZero() && !l.checking {
		l.checked = l.now()
	}
}

// caughtUp ends the catch-up after an outage at once: the cache has listed
// everything again since the target answered.
func (l *liveness) caughtUp() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down.IsZero() {
		l.back = time.Time{}
	}
}

// failed records that a list or watch of the cache failed: the cache may
// miss changes from now on, until a check finds the target answering.
func (l *liveness) failed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.record(err)
}

// record records the outcome of a check or a failure.
func (l *liveness) record(err error) {
	now := l.now()
	switch {
	case err == nil && !l.down.IsZero():
		l.down, l.cause, l.back = time.Time{}, nil, now
	case err != nil:
		if l.down.IsZero() {
			l.down = now
		}
		l.cause = err
	}
}

// err is the error of the last answer; l.mu is held.
func (l *liveness) err() error {
	if l.down.IsZero() {
		return nil
	}
	return backend.Transient(errors.Wrapf(l.cause, errFmtUnreachable, l.down.UTC().Format(time.RFC3339)))
}

// fresh tells whether the cache can be read: the target answers and the
// informers had time to catch up after an outage.
func (l *liveness) fresh() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.down.IsZero() && (l.back.IsZero() || l.now().Sub(l.back) >= l.catchUp)
}

// readyz returns a check that GETs /readyz of the API server of cfg,
// through a REST client so that client-go's request metrics count it. Only
// no answer or a 5xx fails it: a server that refuses the path (403, 404)
// still answers.
func readyz(cfg *rest.Config) (func(ctx context.Context) error, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		return nil, errors.Wrap(err, errProbe)
	}
	return func(ctx context.Context) error {
		err := rc.Get().AbsPath("/readyz").Do(ctx).Error()
		if serverAnswered(err) {
			return nil
		}
		return err
	}, nil
}

// serverAnswered tells whether a request that returned err reached the API
// server and was answered: it succeeded, or the server refused it (a 4xx).
func serverAnswered(err error) bool {
	var s kerrors.APIStatus
	return err == nil || errors.As(err, &s) && s.Status().Code < http.StatusInternalServerError
}
