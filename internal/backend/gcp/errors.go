/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"google.golang.org/api/googleapi"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

const (
	errFmtOperation = "the %s operation on %s failed: %s"
	errFmtToken     = "cannot fetch an access token: HTTP %d%s"
)

// Reasons of googleapi.Error.Errors[] that decide a class.
const (
	reasonAlreadyExists     = "alreadyExists"
	reasonRateLimit         = "rateLimitExceeded"
	reasonUserRateLimit     = "userRateLimitExceeded"
	reasonQuotaExceeded     = "quotaExceeded"
	reasonResourceNotReady  = "resourceNotReady"
	reasonResourceInUse     = "resourceInUseByAnotherResource"
	reasonOperationProgress = "operationInProgress"
)

// httpRule classifies a synchronous API error by its HTTP status and
// errors[].reason. The first matching rule wins; an empty reason matches any.
type httpRule struct {
	Code   int
	Reason string
	Class  backend.Class
	Why    string
}

// httpRules is the classification table of synchronous errors, mirrored in
// docs/backends.md. The retry rules follow the Terraform Google provider's
// retry predicates.
func httpRules() []httpRule {
	return []httpRule{
		{http.StatusNotFound, "", backend.ClassNotFound, "the resource does not exist (a 404 from an insert or patch is Permanent: something it refers to is missing)"},
		{http.StatusConflict, reasonAlreadyExists, backend.ClassPermanent, "the name is taken; the backend adopts it first when the ownership labels match"},
		{http.StatusConflict, "", backend.ClassTransient, "operationInProgress and other conflicts pass"},
		{http.StatusTooManyRequests, "", backend.ClassTransient, "rate limited"},
		{http.StatusForbidden, reasonRateLimit, backend.ClassTransient, "rate limited"},
		{http.StatusForbidden, reasonUserRateLimit, backend.ClassTransient, "rate limited"},
		{http.StatusForbidden, reasonQuotaExceeded, backend.ClassQuota, "a project quota is exhausted"},
		{http.StatusForbidden, "", backend.ClassPermanent, "IAM denies the call, or the API is not enabled"},
		{http.StatusUnauthorized, "", backend.ClassPermanent, "the credentials are not accepted"},
		{http.StatusBadRequest, reasonResourceNotReady, backend.ClassTransient, "another operation on the resource is pending"},
		{http.StatusBadRequest, reasonResourceInUse, backend.ClassTransient, "the resource is still in use, e.g. by an instance being deleted"},
		{http.StatusBadRequest, "", backend.ClassPermanent, "the request is invalid: fix the spec"},
		{http.StatusPreconditionFailed, "", backend.ClassTransient, "a fingerprint changed under us"},
	}
}

// operationRule classifies an operation that ended DONE with an error, by
// error.errors[].code.
type operationRule struct {
	Code  string
	Class backend.Class
	Why   string
}

// operationRules is the classification table of operation errors, mirrored
// in docs/backends.md. Codes not listed fall back to httpErrorStatusCode
// (with 404 Permanent), else Transient.
func operationRules() []operationRule {
	return []operationRule{
		{"QUOTA_EXCEEDED", backend.ClassQuota, "a regional quota (CPUS, INSTANCES, ...) is exhausted"},
		{"ZONE_RESOURCE_POOL_EXHAUSTED", backend.ClassQuota, "the zone has no capacity for the machine type"},
		{"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", backend.ClassQuota, "the zone has no capacity for the machine type"},
		{"RESOURCE_NOT_READY", backend.ClassTransient, "another operation is pending"},
		{"RESOURCE_OPERATION_RATE_EXCEEDED", backend.ClassTransient, "rate limited"},
		{"RATE_LIMIT_EXCEEDED", backend.ClassTransient, "rate limited"},
		{"IP_IN_USE_BY_ANOTHER_RESOURCE", backend.ClassTransient, "the static address is still held by a deleted instance"},
		{"INTERNAL_ERROR", backend.ClassTransient, "a GCE failure"},
		{"RESOURCE_NOT_FOUND", backend.ClassPermanent, "the image, network, subnetwork or service account does not exist"},
		{"RESOURCE_ALREADY_EXISTS", backend.ClassPermanent, "the name is taken"},
		{"INVALID_FIELD_VALUE", backend.ClassPermanent, "the request is invalid: fix the spec"},
	}
}

// httpClass returns the class of an HTTP error.
func httpClass(code int, reasons []string) backend.Class {
	for _, r := range httpRules() {
		if r.Code != code {
			continue
		}
		if r.Reason == "" || contains(reasons, r.Reason) {
			return r.Class
		}
	}
	return backend.ClassTransient
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// classify gives err its class. It is applied where an SDK error enters the
// backend; later wraps keep the class.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var be *backend.Error
	if errors.As(err, &be) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return backend.Transient(err)
	}
	// A token endpoint that refuses the credentials (invalid_grant: a
	// revoked or unknown key) is Permanent; its 5xx, 429 and network errors
	// pass.
	var ae *auth.Error
	if errors.As(err, &ae) {
		if ae.Response == nil {
			return backend.Transient(err)
		}
		// The token endpoint's answer is not quoted: it lands in
		// conditions, and its body is the endpoint's to choose.
		err = tokenError(ae)
		if ae.Temporary() {
			return backend.Transient(err)
		}
		return backend.Permanent(err)
	}
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return backend.Transient(err)
	}
	return withClass(httpClass(ge.Code, reasonsOf(ge)), err)
}

// tokenError is what a refusal of the token endpoint says: its status, and
// its OAuth error code (RFC 6749 5.2) when it is one, never its body.
func tokenError(ae *auth.Error) error {
	var body struct {
		Code string `json:"error"`
	}
	code := ""
	if json.Unmarshal(ae.Body, &body) == nil && oauthCode.MatchString(body.Code) {
		code = " " + body.Code
	}
	return errors.Errorf(errFmtToken, ae.Response.StatusCode, code)
}

// oauthCode matches the error codes RFC 6749 defines, and extensions' of
// the same shape.
var oauthCode = regexp.MustCompile(`^[a-z_]{1,64}$`)

// classifyMutation classifies the error of an insert or patch, where a 404
// means that something the request refers to (the zone, the project, the
// network) does not exist. That is not "the instance does not exist", which
// would make Observe and Delete take the instance for gone.
func classifyMutation(err error) error {
	if isNotFound(err) {
		return backend.Permanent(err)
	}
	return classify(err)
}

func withClass(c backend.Class, err error) error {
	switch c {
	case backend.ClassNotFound:
		return backend.NotFound(err)
	case backend.ClassQuota:
		return backend.Quota(err)
	case backend.ClassPermanent:
		return backend.Permanent(err)
	case backend.ClassNone, backend.ClassTransient:
	}
	return backend.Transient(err)
}

func reasonsOf(ge *googleapi.Error) []string {
	out := make([]string, 0, len(ge.Errors))
	for _, e := range ge.Errors {
		out = append(out, e.Reason)
	}
	return out
}

// httpStatus returns the HTTP status of an SDK error, or 0.
func httpStatus(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

func isNotFound(err error) bool { return httpStatus(err) == http.StatusNotFound }

func isAlreadyExists(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusConflict && contains(reasonsOf(ge), reasonAlreadyExists)
}

// operationError returns the classified error of an operation that ended
// with one, or nil. It reads error.errors[] itself: op.Wait and Poll report
// nothing for an operation without httpErrorStatusCode.
func operationError(what string, op *computepb.Operation) error {
	errs := op.GetError().GetErrors()
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(errs))
	codes := make([]string, 0, len(errs))
	for _, e := range errs {
		codes = append(codes, e.GetCode())
		msgs = append(msgs, e.GetCode()+": "+e.GetMessage())
	}
	err := errors.Errorf(errFmtOperation, op.GetOperationType(), what, strings.Join(msgs, "; "))
	return withClass(operationClass(codes, int(op.GetHttpErrorStatusCode())), err)
}

// operationClass returns the class of an operation's error codes: the first
// code with a rule decides, then httpErrorStatusCode.
func operationClass(codes []string, status int) backend.Class {
	for _, c := range codes {
		for _, r := range operationRules() {
			if r.Code == c {
				return r.Class
			}
		}
	}
	switch {
	case status == http.StatusNotFound:
		return backend.ClassPermanent
	case status != 0:
		return httpClass(status, nil)
	}
	return backend.ClassTransient
}
