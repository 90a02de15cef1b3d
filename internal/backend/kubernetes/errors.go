/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// Verbs, as RBAC names them.
const (
	verbGet    = "get"
	verbList   = "list"
	verbCreate = "create"
	verbUpdate = "update"
	verbDelete = "delete"
)

const (
	errFmtCall         = "cannot %s %s %s"
	errFmtForbidden    = "the target cluster's credentials may not %s %s%s (grant the verb in a Role or ClusterRole bound to them)"
	errFmtUnauthorized = "the target cluster rejected the provider config's credentials while trying to %s %s %s; check the kubeconfig or service account"
	errFmtNoNamespace  = "namespace %q does not exist in the target cluster: create it or change forProvider.namespace"
	errFmtNotOurs      = "%s %s already exists and is not managed by this resource (its %s label is %q): delete or rename it, or choose another namespace"
	errFmtInvalid      = "the target cluster refused %s %s as invalid"
)

// call names one API call, for messages.
type call struct {
	verb      string
	kind      string
	resource  string // RBAC resource, such as deployments.apps
	namespace string
	name      string
}

func (c call) object() string {
	switch {
	case c.namespace == "" && c.name == "":
		return "across namespaces"
	case c.name == "":
		return "in namespace " + c.namespace
	case c.namespace == "":
		return c.name
	}
	return c.namespace + "/" + c.name
}

func (c call) scope() string {
	if c.namespace == "" {
		return " cluster wide"
	}
	return " in namespace " + c.namespace
}

// classify wraps an API error of c with a message a platform engineer can act
// on, and the class the reconciler needs. API errors carry no object data,
// so no secret leaks into the message.
func classify(err error, c call) error {
	if err == nil {
		return nil
	}
	switch {
	case kerrors.IsNotFound(err) && c.verb == verbCreate:
		// Creating a namespaced object fails with NotFound only when its
		// namespace is missing.
		return backend.Permanent(errors.Wrapf(err, errFmtNoNamespace, c.namespace))
	case kerrors.IsNotFound(err):
		return backend.NotFound(errors.Wrapf(err, errFmtCall, c.verb, c.kind, c.object()))
	case kerrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota"):
		return backend.Quota(errors.Wrapf(err, errFmtCall, c.verb, c.kind, c.object()))
	case kerrors.IsForbidden(err) && strings.Contains(err.Error(), "quota"):
		// "status unknown for quota": the quota controller has not counted
		// usage yet.
		return backend.Transient(errors.Wrapf(err, errFmtCall, c.verb, c.kind, c.object()))
	case kerrors.IsForbidden(err) && strings.Contains(err.Error(), "being terminated"):
		// The namespace is being deleted; it may be re-created.
		return backend.Transient(errors.Wrapf(err, errFmtCall, c.verb, c.kind, c.object()))
	case kerrors.IsForbidden(err):
		return backend.Permanent(errors.Wrapf(err, errFmtForbidden, c.verb, c.resource, c.scope()))
	case kerrors.IsUnauthorized(err):
		return backend.Permanent(errors.Wrapf(err, errFmtUnauthorized, c.verb, c.kind, c.object()))
	case kerrors.IsInvalid(err), kerrors.IsBadRequest(err), kerrors.IsMethodNotSupported(err):
		return backend.Permanent(errors.Wrapf(err, errFmtInvalid, c.kind, c.object()))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return backend.Transient(errors.Wrapf(err, errFmtCall, c.verb, c.kind, c.object()))
	}
	// Conflicts, timeouts, throttling, 5xx, unreachable servers and anything
	// unknown: trying again later may work.
	return backend.Transient(errors.Wrapf(err, errFmtCall, c.verb, c.kind, c.object()))
}
