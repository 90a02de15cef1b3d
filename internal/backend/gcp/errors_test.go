/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-cmp/cmp"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/protobuf/proto"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// apiErr is what the REST client returns: an *apierror.APIError wrapping a
// *googleapi.Error.
func apiErr(code int, reason string) error {
	ge := &googleapi.Error{Code: code, Message: "msg", Errors: []googleapi.ErrorItem{{Reason: reason, Message: "msg"}}}
	if err, ok := apierror.FromError(ge); ok {
		return err
	}
	return ge
}

func TestClassify(t *testing.T) {
	cases := map[string]struct {
		reason string
		err    error
		want   backend.Class
	}{
		"Nil":               {"nil stays nil.", nil, backend.ClassNone},
		"NotFound":          {"404 is NotFound.", apiErr(404, "notFound"), backend.ClassNotFound},
		"AlreadyExists":     {"409 alreadyExists not adopted is Permanent.", apiErr(409, "alreadyExists"), backend.ClassPermanent},
		"OperationProgress": {"409 operationInProgress passes.", apiErr(409, "operationInProgress"), backend.ClassTransient},
		"TooMany":           {"429 passes.", apiErr(429, "rateLimitExceeded"), backend.ClassTransient},
		"RateLimit":         {"403 rateLimitExceeded passes.", apiErr(403, "rateLimitExceeded"), backend.ClassTransient},
		"UserRateLimit":     {"403 userRateLimitExceeded passes.", apiErr(403, "userRateLimitExceeded"), backend.ClassTransient},
		"QuotaExceeded":     {"403 quotaExceeded is Quota.", apiErr(403, "quotaExceeded"), backend.ClassQuota},
		"Forbidden":         {"403 forbidden is Permanent.", apiErr(403, "forbidden"), backend.ClassPermanent},
		"Unauthorized":      {"401 is Permanent.", apiErr(401, "required"), backend.ClassPermanent},
		"NotReady":          {"400 resourceNotReady passes.", apiErr(400, "resourceNotReady"), backend.ClassTransient},
		"InUse":             {"400 resourceInUseByAnotherResource passes.", apiErr(400, "resourceInUseByAnotherResource"), backend.ClassTransient},
		"Invalid":           {"400 invalid is Permanent.", apiErr(400, "invalid"), backend.ClassPermanent},
		"Precondition":      {"412 passes.", apiErr(412, "conditionNotMet"), backend.ClassTransient},
		"Unavailable":       {"503 passes.", apiErr(503, "backendError"), backend.ClassTransient},
		"Deadline":          {"A deadline passes.", errors.Wrap(context.DeadlineExceeded, "x"), backend.ClassTransient},
		"Other":             {"Anything else passes.", errors.New("connection reset"), backend.ClassTransient},
		"Classified":        {"A class given earlier is kept.", backend.Quota(errors.New("x")), backend.ClassQuota},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, backend.ClassOf(classify(tc.err))); diff != "" {
				t.Errorf("%s\nclassify: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
	if got := backend.ClassOf(classifyMutation(apiErr(404, "notFound"))); got != backend.ClassPermanent {
		t.Errorf("a 404 from an insert must be Permanent, got %s", got)
	}
}

// TestClassifyTokenError shows a token endpoint's refusal reported by its
// status and OAuth error code, never its body: the message lands in the
// resource's conditions, and the body is whatever the endpoint wrote.
func TestClassifyTokenError(t *testing.T) {
	refusal := func(status int, body string) error {
		// As an http.Client wraps the token provider's error.
		return &url.Error{Op: "Post", URL: "https://compute.googleapis.com/x", Err: &auth.Error{Response: &http.Response{StatusCode: status}, Body: []byte(body)}}
	}
	cases := map[string]struct {
		reason string
		err    error
		want   string
		class  backend.Class
	}{
		"InvalidGrant": {
			reason: "A refused key is Permanent, with its OAuth code and no description.",
			err:    refusal(400, `{"error": "invalid_grant", "error_description": "metadata: SECRET"}`),
			want:   "cannot fetch an access token: HTTP 400 invalid_grant",
			class:  backend.ClassPermanent,
		},
		"Page": {
			reason: "A body that is not an OAuth error is not quoted at all.",
			err:    refusal(403, `<html>SECRET</html>`),
			want:   "cannot fetch an access token: HTTP 403",
			class:  backend.ClassPermanent,
		},
		"CodeNotACode": {
			reason: "An error field that is not a code's shape is not quoted.",
			err:    refusal(400, `{"error": "SECRET data"}`),
			want:   "cannot fetch an access token: HTTP 400",
			class:  backend.ClassPermanent,
		},
		"Unavailable": {
			reason: "A 503 passes, and says no more.",
			err:    refusal(503, `SECRET`),
			want:   "cannot fetch an access token: HTTP 503",
			class:  backend.ClassTransient,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := classify(tc.err)
			if diff := cmp.Diff(tc.class, backend.ClassOf(err)); diff != "" {
				t.Errorf("%s\nclassify: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("%s\nclassify(...).Error(): -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestOperationError(t *testing.T) {
	op := func(code string, status int32) *computepb.Operation {
		o := &computepb.Operation{
			OperationType: proto.String("insert"),
			Status:        computepb.Operation_DONE.Enum(),
			Error:         &computepb.Error{Errors: []*computepb.Errors{{Code: proto.String(code), Message: proto.String("details")}}},
		}
		if status != 0 {
			o.HttpErrorStatusCode = proto.Int32(status)
		}
		return o
	}
	cases := map[string]struct {
		reason string
		op     *computepb.Operation
		want   backend.Class
		msg    string
	}{
		"Success":        {"An operation without errors is no error.", &computepb.Operation{Status: computepb.Operation_DONE.Enum()}, backend.ClassNone, ""},
		"Quota":          {"QUOTA_EXCEEDED is Quota, with or without an HTTP status.", op("QUOTA_EXCEEDED", 0), backend.ClassQuota, "the insert operation on instance x failed: QUOTA_EXCEEDED: details"},
		"Quota403":       {"QUOTA_EXCEEDED with 403 is still Quota, not Permanent.", op("QUOTA_EXCEEDED", 403), backend.ClassQuota, ""},
		"Pool":           {"ZONE_RESOURCE_POOL_EXHAUSTED is Quota.", op("ZONE_RESOURCE_POOL_EXHAUSTED", 503), backend.ClassQuota, ""},
		"PoolDetails":    {"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS is Quota.", op("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", 0), backend.ClassQuota, ""},
		"ImageMissing":   {"RESOURCE_NOT_FOUND is a broken reference, Permanent: never NotFound.", op("RESOURCE_NOT_FOUND", 404), backend.ClassPermanent, ""},
		"IPInUse":        {"IP_IN_USE_BY_ANOTHER_RESOURCE passes: the old VM is going.", op("IP_IN_USE_BY_ANOTHER_RESOURCE", 400), backend.ClassTransient, ""},
		"Unknown400":     {"An unknown code falls back to its HTTP status.", op("SOMETHING_NEW", 400), backend.ClassPermanent, ""},
		"Unknown404":     {"An unknown code with 404 is Permanent.", op("SOMETHING_NEW", 404), backend.ClassPermanent, ""},
		"UnknownNoCode":  {"An unknown code without status passes.", op("SOMETHING_NEW", 0), backend.ClassTransient, ""},
		"UnknownServer":  {"An unknown code with 503 passes.", op("SOMETHING_NEW", 503), backend.ClassTransient, ""},
		"UnknownDenied":  {"An unknown code with 403 is Permanent.", op("SOMETHING_NEW", 403), backend.ClassPermanent, ""},
		"InternalFailed": {"INTERNAL_ERROR passes.", op("INTERNAL_ERROR", 500), backend.ClassTransient, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := operationError("instance x", tc.op)
			if diff := cmp.Diff(tc.want, backend.ClassOf(err)); diff != "" {
				t.Errorf("%s\nclass: -want +got:\n%s", tc.reason, diff)
			}
			if tc.msg != "" && (err == nil || err.Error() != tc.msg) {
				t.Errorf("%s\nmessage = %v, want %q", tc.reason, err, tc.msg)
			}
		})
	}
}
