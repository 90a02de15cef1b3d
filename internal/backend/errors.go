/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package backend

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Class decides what the reconciler does with a backend error.
type Class string

// Error classes. An error no backend classified is Transient: retrying a
// permanent problem with backoff costs a few calls, while giving up on a
// transient one leaves a proxy that never converges.
const (
	// ClassNone is the class of a nil error.
	ClassNone Class = ""
	// ClassNotFound means the instance or one of its parts does not exist.
	// Observe turns it into "does not exist", Delete into success.
	ClassNotFound Class = "NotFound"
	// ClassQuota means the backend refused for lack of quota or capacity.
	// Retried with backoff; the resource says QuotaExceeded.
	ClassQuota Class = "Quota"
	// ClassTransient means trying again later may succeed.
	ClassTransient Class = "Transient"
	// ClassPermanent means the same request will fail again until the spec,
	// the credentials or the backend change. Retried with backoff only so
	// that an outside fix is picked up.
	ClassPermanent Class = "Permanent"
)

// Error is a backend error with its class.
type Error struct {
	class Class
	err   error
}

// Error returns the message of the wrapped error.
func (e *Error) Error() string { return e.err.Error() }

// Unwrap returns the wrapped error.
func (e *Error) Unwrap() error { return e.err }

// Class of the error.
func (e *Error) Class() Class { return e.class }

// classify wraps err with a class; nil stays nil so callers can write
// return backend.NotFound(call()).
func classify(c Class, err error) error {
	if err == nil {
		return nil
	}
	return &Error{class: c, err: err}
}

// NotFound classifies err as ClassNotFound.
func NotFound(err error) error { return classify(ClassNotFound, err) }

// Quota classifies err as ClassQuota.
func Quota(err error) error { return classify(ClassQuota, err) }

// Transient classifies err as ClassTransient.
func Transient(err error) error { return classify(ClassTransient, err) }

// Permanent classifies err as ClassPermanent.
func Permanent(err error) error { return classify(ClassPermanent, err) }

// ClassOf returns the class of the outermost classified error in err's chain.
// An error without a class is ClassTransient, on purpose: see Class.
func ClassOf(err error) Class {
	if err == nil {
		return ClassNone
	}
	var e *Error
	if errors.As(err, &e) {
		return e.class
	}
	return ClassTransient
}

// IsNotFound reports whether err is of ClassNotFound.
func IsNotFound(err error) bool { return ClassOf(err) == ClassNotFound }

// IgnoreNotFound returns nil for an error of ClassNotFound, else err.
func IgnoreNotFound(err error) error {
	if IsNotFound(err) {
		return nil
	}
	return err
}

// Reason is the condition reason a class is reported with, so a platform
// engineer can tell a quota problem from a broken spec at a glance.
func (c Class) Reason() string {
	switch c {
	case ClassQuota:
		return "QuotaExceeded"
	case ClassPermanent:
		return "PermanentError"
	case ClassNotFound:
		return "NotFound"
	case ClassNone:
		return "Available"
	case ClassTransient:
		return "TransientError"
	}
	return "TransientError"
}
