/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package backend

import (
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-cmp/cmp"
)

func TestClassOf(t *testing.T) {
	boom := errors.New("boom")
	cases := map[string]struct {
		reason string
		err    error
		want   Class
	}{
		"Nil":           {reason: "A nil error has no class.", err: nil, want: ClassNone},
		"Unclassified":  {reason: "An unclassified error is Transient, on purpose.", err: boom, want: ClassTransient},
		"NotFound":      {reason: "NotFound classifies as NotFound.", err: NotFound(boom), want: ClassNotFound},
		"Quota":         {reason: "Quota classifies as Quota.", err: Quota(boom), want: ClassQuota},
		"Permanent":     {reason: "Permanent classifies as Permanent.", err: Permanent(boom), want: ClassPermanent},
		"Transient":     {reason: "Transient classifies as Transient.", err: Transient(boom), want: ClassTransient},
		"Wrapped":       {reason: "Wrapping keeps the class.", err: errors.Wrap(Quota(boom), "cannot create"), want: ClassQuota},
		"OutermostWins": {reason: "A backend may reclassify an inner error.", err: Permanent(errors.Wrap(NotFound(boom), "x")), want: ClassPermanent},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ClassOf(tc.err)); diff != "" {
				t.Errorf("%s\nClassOf(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestClassifyNil(t *testing.T) {
	for name, fn := range map[string]func(error) error{"NotFound": NotFound, "Quota": Quota, "Transient": Transient, "Permanent": Permanent} {
		if err := fn(nil); err != nil {
			t.Errorf("%s(nil): want nil so `return %s(call())` works, got %v", name, name, err)
		}
	}
}

func TestErrorKeepsMessageAndChain(t *testing.T) {
	inner := errors.New("quota 'CPUS' exceeded")
	err := Quota(inner)
	if diff := cmp.Diff(inner.Error(), err.Error()); diff != "" {
		t.Errorf("message: -want, +got:\n%s", diff)
	}
	if !errors.Is(err, inner) {
		t.Errorf("errors.Is(Quota(inner), inner): want true")
	}
	if IgnoreNotFound(NotFound(inner)) != nil || IgnoreNotFound(err) == nil {
		t.Errorf("IgnoreNotFound must drop only NotFound errors")
	}
}

func TestClassReason(t *testing.T) {
	cases := map[Class]string{
		ClassQuota: "QuotaExceeded", ClassPermanent: "PermanentError", ClassTransient: "TransientError",
		ClassNotFound: "NotFound", ClassNone: "Available",
	}
	for c, want := range cases {
		if diff := cmp.Diff(want, c.Reason()); diff != "" {
			t.Errorf("%q.Reason(): -want, +got:\n%s", c, diff)
		}
	}
}
