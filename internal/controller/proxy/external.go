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

// External is a managed.TypedExternalClient of any proxy kind. One is made
// per reconcile.
type External[M resource.ModernManaged, P, O any] struct {
	kube             client.Client
	kind             Kind[M, P, O]
	backend          backend.Backend[P, O]
	creds            *CredentialStore
	providerInstance string

	// known are the credentials found earlier in this reconcile, so that
	// Create right after Observe uses them without reading again.
	known *backend.Credentials

	// traffic, when set, gets the traffic each Observe reports, under
	// backendName.
	traffic     *TrafficMetrics
	backendName string
}

// NewExternal returns an External that drives b for resources of kind k,
// deriving generated passwords with credentialsKey.
func NewExternal[M resource.ModernManaged, P, O any](k Kind[M, P, O], b backend.Backend[P, O], c client.Client, providerInstance string, credentialsKey []byte) *External[M, P, O] {
	return &External[M, P, O]{kube: c, kind: k, backend: b, creds: NewCredentialStore(c, credentialsKey), providerInstance: providerInstance}
}

// WithTraffic makes e report the traffic each Observe reads to m, labelled
// with backendName.
func (e *External[M, P, O]) WithTraffic(m *TrafficMetrics, backendName string) *External[M, P, O] {
	e.traffic, e.backendName = m, backendName
	return e
}

// credentials returns the credentials of mg's proxy, generating missing ones
// only when generate is true.
func (e *External[M, P, O]) credentials(ctx context.Context, mg M, generate bool) (backend.Credentials, error) {
	if e.known != nil {
		return *e.known, nil
	}
	c, err := e.creds.Credentials(ctx, mg, e.kind.Proxy(mg).CredentialsSecretRef, generate)
	if err != nil {
		return backend.Credentials{}, err
	}
	if c != (backend.Credentials{}) {
		e.known = &c
	}
	return c, nil
}

// desired builds what the backend should run for mg, with credentials c.
func (e *External[M, P, O]) desired(mg M, c backend.Credentials) backend.Desired[P] {
	return backend.Desired[P]{
		Name:        InstanceName(mg, e.kind.MaxNameLength()),
		Ownership:   backend.Ownership{Owner: OwnerOf(mg), ProviderInstance: e.providerInstance},
		Proxy:       e.kind.Proxy(mg),
		Credentials: c,
		Params:      e.kind.Params(mg),
	}
}

// mayWrite tells whether the management policies of mg let the reconciler
// create or update the instance; only then may credentials be generated.
// Observe-only resources (importing an existing proxy) write nothing.
func mayWrite(mg resource.Managed) bool {
	p := mg.GetManagementPolicies()
	for _, a := range p {
		if a == xpv2.ManagementActionAll || a == xpv2.ManagementActionCreate || a == xpv2.ManagementActionUpdate {
			return true
		}
	}
	// No policies at all is full management while the feature is off (and
	// paused, so never observed, while it is on).
	return len(p) == 0
}

// mayCreate tells whether the management policies of mg let the reconciler
// create the instance (as the reconciler's ShouldCreate).
func mayCreate(mg resource.Managed) bool {
	p := mg.GetManagementPolicies()
	for _, a := range p {
		if a == xpv2.ManagementActionAll || a == xpv2.ManagementActionCreate {
			return true
		}
	}
	return len(p) == 0
}

// Observe reports whether the instance exists and is up to date, and
// publishes its status and connection details.
func (e *External[M, P, O]) Observe(ctx context.Context, mg M) (managed.ExternalObservation, error) {
	var c backend.Credentials
	// A resource being deleted only needs to know whether its instance is
	// still there: its credentials Secret may already be gone (deleted with
	// its namespace), and must not hold up the deletion.
	if !meta.WasDeleted(mg) {
		var err error
		if c, err = e.credentials(ctx, mg, mayWrite(mg)); err != nil {
			return managed.ExternalObservation{}, failed(mg, errObserve, err)
		}
	}
	d := e.desired(mg, c)
	o, err := e.backend.Observe(ctx, d)
	if backend.IsNotFound(err) {
		e.traffic.forget(e.backendName, mg)
		if !meta.WasDeleted(mg) && mayCreate(mg) {
			// The managed reconciler adds its finalizer (one write) and
			// then saves the create-pending annotation (another) before
			// Create. Added here, the finalizer is already there, and is
			// saved with the annotation and the external name in one
			// write, still before anything is created.
			meta.AddFinalizer(mg, managed.FinalizerName)
		}
		return managed.ExternalObservation{ResourceExists: false}, nil
	}
	if err != nil {
		return managed.ExternalObservation{}, failed(mg, errObserve, err)
	}
	if meta.WasDeleted(mg) {
		// Also when the instance is kept (deletionPolicy Orphan).
		e.traffic.forget(e.backendName, mg)
	} else {
		e.traffic.record(e.backendName, mg, o.Traffic, o.TrafficAt)
	}
	// Still coming up: the status Create wrote stays as it is, and the next
	// write is the one that says Ready (or what went wrong).
	keep := o.Creating && mg.GetCondition(xpv2.TypeReady).Reason == xpv2.ReasonCreating
	if !keep {
		e.kind.SetObservation(mg, o)
		provisioned(mg)
	}
	upToDate := o.UpToDate
	switch {
	case keep:
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
	c, err := e.credentials(ctx, mg, true)
	if err != nil {
		return managed.ExternalCreation{}, e.persisted(ctx, mg, errCreate, err)
	}
	d := e.desired(mg, c)
	meta.SetExternalName(mg, d.Name)
	return managed.ExternalCreation{}, e.persisted(ctx, mg, errCreate, e.backend.Create(ctx, d))
}

// Update makes the instance match the spec, replacing it when it stopped.
func (e *External[M, P, O]) Update(ctx context.Context, mg M) (managed.ExternalUpdate, error) {
	c, err := e.credentials(ctx, mg, true)
	if err != nil {
		return managed.ExternalUpdate{}, e.persisted(ctx, mg, errUpdate, err)
	}
	return managed.ExternalUpdate{}, e.persisted(ctx, mg, errUpdate, e.backend.Update(ctx, e.desired(mg, c)))
}

// Delete starts deleting the instance; Observe reports when it is gone.
func (e *External[M, P, O]) Delete(ctx context.Context, mg M) (managed.ExternalDelete, error) {
	// Deleting needs no credentials: a missing credentials Secret must not
	// block the deletion of an instance. What is already gone is deleted.
	err := backend.IgnoreNotFound(e.backend.Delete(ctx, e.desired(mg, backend.Credentials{})))
	e.traffic.forget(e.backendName, mg)
	return managed.ExternalDelete{}, e.persisted(ctx, mg, errDelete, err)
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

// connectionDetails are what applications need to use the proxy. Unknown
// credentials (an observed proxy whose credentials were never generated
// here) are left out rather than published empty.
func connectionDetails(endpoint string, c backend.Credentials) managed.ConnectionDetails {
	if endpoint == "" {
		return nil
	}
	cd := managed.ConnectionDetails{ConnectionEndpoint: []byte(endpoint)}
	if _, port, err := net.SplitHostPort(endpoint); err == nil {
		if _, err := strconv.Atoi(port); err == nil {
			cd[ConnectionPort] = []byte(port)
		}
	}
	u := url.URL{Scheme: "http", Host: endpoint}
	if c != (backend.Credentials{}) {
		cd[ConnectionUsername] = []byte(c.Username)
		cd[ConnectionPassword] = []byte(c.Password)
		u.User = url.UserPassword(c.Username, c.Password)
	}
	cd[ConnectionURL] = []byte(u.String())
	return cd
}
