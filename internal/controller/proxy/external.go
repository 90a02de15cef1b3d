/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// Connection detail keys written to the connection Secret.
const (
	ConnectionEndpoint = "endpoint"
	ConnectionPort     = "port"
	ConnectionUsername = "username"
	ConnectionPassword = "password"
	ConnectionURL      = "url"
)

// ConditionReasonReplacing is the Ready reason while a stopped or terminated
// instance is replaced.
const ConditionReasonReplacing xpv2.ConditionReason = "Replacing"

const (
	errObserve = "cannot observe the proxy instance"
	errCreate  = "cannot create the proxy instance"
	errUpdate  = "cannot update the proxy instance"
	errDelete  = "cannot delete the proxy instance"
)

// Kind adapts one managed resource kind M, whose backend takes parameters P
// and reports observations O.
type Kind[M resource.ModernManaged, P, O any] interface {
	// Proxy returns what the proxy of mg allows.
	Proxy(mg M) commonv1alpha1.ProxyParameters
	// Params returns the backend parameters of mg.
	Params(mg M) P
	// SetObservation writes what the backend reports into mg's status.
	SetObservation(mg M, o backend.Observation[O])
	// MaxNameLength is the longest instance name the backend accepts.
	MaxNameLength() int
}

// External is a managed.TypedExternalClient of any proxy kind.
type External[M resource.ModernManaged, P, O any] struct {
	kube             client.Client
	kind             Kind[M, P, O]
	backend          backend.Backend[P, O]
	creds            *CredentialStore
	providerInstance string
}

// NewExternal returns an External that drives b for resources of kind k.
func NewExternal[M resource.ModernManaged, P, O any](k Kind[M, P, O], b backend.Backend[P, O], c client.Client, providerInstance string) *External[M, P, O] {
	return &External[M, P, O]{kube: c, kind: k, backend: b, creds: NewCredentialStore(c), providerInstance: providerInstance}
}

// desired builds what the backend should run for mg.
func (e *External[M, P, O]) desired(ctx context.Context, mg M) (backend.Desired[P], error) {
	proxy := e.kind.Proxy(mg)
	creds, err := e.creds.Credentials(ctx, mg, proxy.CredentialsSecretRef)
	if err != nil {
		return backend.Desired[P]{}, err
	}
	return backend.Desired[P]{
		Name:        InstanceName(mg, e.kind.MaxNameLength()),
		Ownership:   backend.Ownership{Owner: OwnerOf(mg), ProviderInstance: e.providerInstance},
		Proxy:       proxy,
		Credentials: creds,
		Params:      e.kind.Params(mg),
	}, nil
}

// Observe reports whether the instance exists and is up to date, and
// publishes its status and connection details.
func (e *External[M, P, O]) Observe(ctx context.Context, mg M) (managed.ExternalObservation, error) {
	d, err := e.desired(ctx, mg)
	if err != nil {
		return managed.ExternalObservation{}, failed(mg, errObserve, err)
	}
	o, err := e.backend.Observe(ctx, d)
	if backend.IsNotFound(err) {
		return managed.ExternalObservation{ResourceExists: false}, nil
	}
	if err != nil {
		return managed.ExternalObservation{}, failed(mg, errObserve, err)
	}
	e.kind.SetObservation(mg, o)
	provisioned(mg)
	upToDate := o.UpToDate
	switch {
	case o.State == commonv1alpha1.StateStopped || o.State == commonv1alpha1.StateTerminated:
		// Stopped and terminated instances are replaced: Update deletes the
		// instance and the next Create makes it again under the same name.
		upToDate = false
		mg.SetConditions(xpv2.Condition{Type: xpv2.TypeReady, Status: "False", LastTransitionTime: metav1.Now(),
			Reason: ConditionReasonReplacing, Message: fmt.Sprintf("instance is %s: replacing it", o.State)})
	case o.Ready:
		mg.SetConditions(xpv2.Available())
	default:
		mg.SetConditions(xpv2.Unavailable().WithMessage(o.Message))
	}
	return managed.ExternalObservation{
		ResourceExists:    true,
		ResourceUpToDate:  upToDate,
		ConnectionDetails: connectionDetails(o.Endpoint, d.Credentials),
		Diff:              o.Diff,
	}, nil
}

// Create starts creating the instance.
func (e *External[M, P, O]) Create(ctx context.Context, mg M) (managed.ExternalCreation, error) {
	d, err := e.desired(ctx, mg)
	if err != nil {
		return managed.ExternalCreation{}, e.persisted(ctx, mg, errCreate, err)
	}
	meta.SetExternalName(mg, d.Name)
	return managed.ExternalCreation{}, e.persisted(ctx, mg, errCreate, e.backend.Create(ctx, d))
}

// Update makes the instance match the spec, replacing it when it stopped.
func (e *External[M, P, O]) Update(ctx context.Context, mg M) (managed.ExternalUpdate, error) {
	d, err := e.desired(ctx, mg)
	if err != nil {
		return managed.ExternalUpdate{}, e.persisted(ctx, mg, errUpdate, err)
	}
	return managed.ExternalUpdate{}, e.persisted(ctx, mg, errUpdate, e.backend.Update(ctx, d))
}

// Delete starts deleting the instance; Observe reports when it is gone.
func (e *External[M, P, O]) Delete(ctx context.Context, mg M) (managed.ExternalDelete, error) {
	// Deleting needs no credentials: a missing credentials Secret must not
	// block the deletion of an instance.
	d := backend.Desired[P]{
		Name:      InstanceName(mg, e.kind.MaxNameLength()),
		Ownership: backend.Ownership{Owner: OwnerOf(mg), ProviderInstance: e.providerInstance},
		Proxy:     e.kind.Proxy(mg),
		Params:    e.kind.Params(mg),
	}
	return managed.ExternalDelete{}, e.persisted(ctx, mg, errDelete, e.backend.Delete(ctx, d))
}

// persisted is failed for Create, Update and Delete, which also saves the
// Provisioned condition at once: after those calls fail, the managed
// reconciler saves critical annotations first, which reloads the object and
// would drop the condition. Observe needs no help; its status is saved as is.
func (e *External[M, P, O]) persisted(ctx context.Context, mg M, msg string, err error) error {
	if err == nil {
		return nil
	}
	before, ok := mg.DeepCopyObject().(client.Object)
	err = failed(mg, msg, err)
	if ok {
		// Failing to save the reason is not worth more than the error.
		_ = e.kube.Status().Patch(ctx, mg, client.MergeFrom(before))
	}
	return err
}

// Disconnect does nothing: backend clients are pooled per provider config.
func (e *External[M, P, O]) Disconnect(_ context.Context) error { return nil }

// TypeProvisioned is the condition that tells, by its reason, the class of
// the last backend error: QuotaExceeded, PermanentError or TransientError.
// Synced carries the message; this condition lets a platform engineer (and
// a policy) tell a quota problem from a broken spec at a glance.
const TypeProvisioned xpv2.ConditionType = "Provisioned"

// failed wraps err with msg and the meaning of its class, and records the
// class as the reason of the Provisioned condition.
func failed(mg resource.Managed, msg string, err error) error {
	if err == nil {
		return nil
	}
	class := backend.ClassOf(err)
	mg.SetConditions(xpv2.Condition{
		Type:               TypeProvisioned,
		Status:             "False",
		LastTransitionTime: metav1.Now(),
		Reason:             xpv2.ConditionReason(class.Reason()),
		Message:            classMeaning(class),
	})
	return errors.Wrap(err, msg+": "+classMeaning(class))
}

// provisioned records that the backend answered without error.
func provisioned(mg resource.Managed) {
	mg.SetConditions(xpv2.Condition{
		Type:               TypeProvisioned,
		Status:             "True",
		LastTransitionTime: metav1.Now(),
		Reason:             xpv2.ConditionReason(backend.ClassNone.Reason()),
	})
}

func classMeaning(c backend.Class) string {
	switch c {
	case backend.ClassQuota:
		return "the backend has no quota or capacity left; retrying with backoff"
	case backend.ClassPermanent:
		return "the backend refused the request; fix the spec, the provider config or its credentials"
	case backend.ClassNotFound:
		return "a part the proxy needs does not exist"
	case backend.ClassNone, backend.ClassTransient:
	}
	return "the backend is unavailable; retrying with backoff"
}

// connectionDetails are what applications need to use the proxy.
func connectionDetails(endpoint string, c backend.Credentials) managed.ConnectionDetails {
	if endpoint == "" {
		return nil
	}
	cd := managed.ConnectionDetails{
		ConnectionEndpoint: []byte(endpoint),
		ConnectionUsername: []byte(c.Username),
		ConnectionPassword: []byte(c.Password),
	}
	if _, port, err := net.SplitHostPort(endpoint); err == nil {
		if _, err := strconv.Atoi(port); err == nil {
			cd[ConnectionPort] = []byte(port)
		}
	}
	u := url.URL{Scheme: "http", Host: endpoint, User: url.UserPassword(c.Username, c.Password)}
	cd[ConnectionURL] = []byte(u.String())
	return cd
}
