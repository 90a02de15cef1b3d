package gcpfake

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Reasons GCE puts in error.errors[].reason. The googleapi client exposes them
// as googleapi.Error.Errors[].Reason, which is what callers classify on.
const (
	ReasonNotFound          = "notFound"
	ReasonAlreadyExists     = "alreadyExists"
	ReasonInvalid           = "invalid"
	ReasonRequired          = "required"
	ReasonResourceNotReady  = "resourceNotReady"
	ReasonResourceInUse     = "resourceInUseByAnotherResource"
	ReasonConditionNotMet   = "conditionNotMet"
	ReasonRateLimitExceeded = "rateLimitExceeded"
	ReasonQuotaExceeded     = "quotaExceeded"
	ReasonForbidden         = "forbidden"
	ReasonBackendError      = "backendError"
	ReasonAuthRequired      = "required"
)

// apiError is a synchronous GCE error. Handlers return it and the server
// renders it in the legacy envelope real GCE still uses:
// {"error":{"code","message","errors":[{"domain","reason","message"}]}}.
type apiError struct {
	Code         int
	Reason       string
	Message      string
	Location     string
	LocationType string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Code, e.Reason, e.Message) }

type errorItem struct {
	Domain       string `json:"domain"`
	Reason       string `json:"reason"`
	Message      string `json:"message"`
	Location     string `json:"location,omitempty"`
	LocationType string `json:"locationType,omitempty"`
}

type errorBody struct {
	Code    int         `json:"code"`
	Message string      `json:"message"`
	Errors  []errorItem `json:"errors"`
}

func (e *apiError) envelope() []byte {
	b, _ := json.Marshal(map[string]errorBody{"error": {
		Code:    e.Code,
		Message: e.Message,
		Errors: []errorItem{{
			Domain: "global", Reason: e.Reason, Message: e.Message,
			Location: e.Location, LocationType: e.LocationType,
		}},
	}})
	return b
}

func writeAPIError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(e.Code)
	_, _ = w.Write(e.envelope())
}

func errNotFound(resource string) *apiError {
	return &apiError{Code: http.StatusNotFound, Reason: ReasonNotFound,
		Message: fmt.Sprintf("The resource '%s' was not found", resource)}
}

func errAlreadyExists(resource string) *apiError {
	return &apiError{Code: http.StatusConflict, Reason: ReasonAlreadyExists,
		Message: fmt.Sprintf("The resource '%s' already exists", resource)}
}

func errInvalid(field, value, why string) *apiError {
	return &apiError{Code: http.StatusBadRequest, Reason: ReasonInvalid,
		Message: fmt.Sprintf("Invalid value for field '%s': '%s'. %s", field, value, why)}
}

func errRequired(field string) *apiError {
	return &apiError{Code: http.StatusBadRequest, Reason: ReasonRequired,
		Message: fmt.Sprintf("Required field '%s' not specified", field)}
}

func errNotReady(resource string) *apiError {
	return &apiError{Code: http.StatusBadRequest, Reason: ReasonResourceNotReady,
		Message: fmt.Sprintf("The resource '%s' is not ready", resource)}
}

func errInUse(resource, user string) *apiError {
	return &apiError{Code: http.StatusBadRequest, Reason: ReasonResourceInUse,
		Message: fmt.Sprintf("The address resource '%s' is already being used by '%s'", resource, user)}
}

// errFingerprint is GCE's answer to a setLabels (of an address or an
// instance) whose labelFingerprint is not the resource's current one:
// someone changed the labels since the caller read them. GCE names the
// If-Match header as the location, whatever the body held.
func errFingerprint() *apiError {
	return &apiError{Code: http.StatusPreconditionFailed, Reason: ReasonConditionNotMet,
		Message: "Labels fingerprint either invalid or resource labels have changed", Location: "If-Match", LocationType: "header"}
}

// errTagsFingerprint is the fake's answer to a setTags whose fingerprint is
// missing or not the instance's current tags.fingerprint: 412
// conditionNotMet, as GCE documents for every fingerprint. The message is
// the fake's own; GCE's exact wording for tags is unverified.
func errTagsFingerprint() *apiError {
	return &apiError{Code: http.StatusPreconditionFailed, Reason: ReasonConditionNotMet,
		Message: "Supplied fingerprint does not match current fingerprint."}
}

// errMetadataFingerprint is GCE's answer to a setMetadata whose fingerprint
// is missing or not the instance's current one.
func errMetadataFingerprint() *apiError {
	return &apiError{Code: http.StatusPreconditionFailed, Reason: ReasonConditionNotMet,
		Message: "Supplied fingerprint does not match current metadata fingerprint."}
}

func errUnauthenticated() *apiError {
	return &apiError{Code: http.StatusUnauthorized, Reason: ReasonAuthRequired,
		Message:  "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
		Location: "Authorization", LocationType: "header"}
}

func errInternal(err error) *apiError {
	return &apiError{Code: http.StatusInternalServerError, Reason: ReasonBackendError,
		Message: "Internal error: " + err.Error()}
}
