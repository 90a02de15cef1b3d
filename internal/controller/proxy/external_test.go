/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
)

// testKind adapts KubernetesProxy as the kubernetesproxy package does; that
// package imports this one, so it cannot be used here.
type testKind struct{}

func (testKind) Proxy(mg *v1alpha1.KubernetesProxy) commonv1alpha1.ProxyParameters {
	return mg.Spec.ForProvider.ProxyParameters
}
func (testKind) Params(mg *v1alpha1.KubernetesProxy) kparams { return mg.Spec.ForProvider }
func (testKind) SetObservation(mg *v1alpha1.KubernetesProxy, o backend.Observation[kobs]) {
	mg.Status.AtProvider = o.Extra
	mg.Status.AtProvider.ProxyObservation = CommonObservation(o)
}
func (testKind) MaxNameLength() int { return testMaxName }

// testMaxName is the longest instance name of testKind.
const testMaxName = 63

const (
	extEndpoint = "10.0.0.7:3128"
	extUID      = "0b3c1e0e-5f3a-4c1e-9a57-1a2b3c4d5e6f"

	meaningQuota     = "the backend has no quota or capacity left; retrying with backoff"
	meaningTransient = "the backend is unavailable; retrying with backoff"
	meaningPermanent = "the backend refused the request; fix the spec, the provider config or its credentials"
	meaningNotFound  = "a part the proxy needs does not exist"
)

var (
	errBoom = errors.New("boom")
	alice   = backend.Credentials{Username: "alice", Password: "s3cret"}
)

type mgOption func(*v1alpha1.KubernetesProxy)

// extMR is a KubernetesProxy whose credentials come from the Secret "creds".
func extMR(o ...mgOption) *v1alpha1.KubernetesProxy {
	mg := &v1alpha1.KubernetesProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: extUID}}
	mg.Spec.ForProvider.CredentialsSecretRef = &commonv1alpha1.LocalSecretReference{Name: "creds"}
	// The resource's own: what a config without spec.allowedNamespaces
	// allows.
	mg.Spec.ForProvider.Namespace = "team"
	for _, fn := range o {
		fn(mg)
	}
	return mg
}

// withGenerated makes mg use generated credentials.
func withGenerated() mgOption {
	return func(mg *v1alpha1.KubernetesProxy) { mg.Spec.ForProvider.CredentialsSecretRef = nil }
}

func withPolicies(p ...xpv2.ManagementAction) mgOption {
	return func(mg *v1alpha1.KubernetesProxy) { mg.SetManagementPolicies(p) }
}

func withDeletion() mgOption {
	return func(mg *v1alpha1.KubernetesProxy) {
		now := metav1.Now()
		mg.SetDeletionTimestamp(&now)
	}
}

// givenSecret answers a Get of the credentialsSecretRef Secret with c.
func givenSecret(c backend.Credentials) test.MockGetFn {
	return test.NewMockGetFn(nil, func(o client.Object) error {
		s, ok := o.(*corev1.Secret)
		if !ok {
			return errors.Errorf("unexpected Get of %T", o)
		}
		s.Data = map[string][]byte{SecretKeyUsername: []byte(c.Username), SecretKeyPassword: []byte(c.Password)}
		return nil
	})
}

func extScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := registry.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// observed returns an ObserveFn that checks the credentials it is given and
// reports o.
func observed(want backend.Credentials, o backend.Observation[kobs]) func(context.Context, backend.Desired[kparams]) (backend.Observation[kobs], error) {
	return func(_ context.Context, d backend.Desired[kparams]) (backend.Observation[kobs], error) {
		if d.Credentials != want {
			return backend.Observation[kobs]{}, errors.Errorf("Observe got credentials %q, want %q", d.Credentials.Username, want.Username)
		}
		return o, nil
	}
}

func failing(err error) func(context.Context, backend.Desired[kparams]) (backend.Observation[kobs], error) {
	return func(context.Context, backend.Desired[kparams]) (backend.Observation[kobs], error) {
		return backend.Observation[kobs]{}, err
	}
}

func provisionedTrue() xpv2.Condition {
	return xpv2.Condition{Type: TypeProvisioned, Status: corev1.ConditionTrue, Reason: "Available"}
}

func provisionedFalse(reason xpv2.ConditionReason, message string) xpv2.Condition {
	return xpv2.Condition{Type: TypeProvisioned, Status: corev1.ConditionFalse, Reason: reason, Message: message}
}

// An errorClass is a class of backend error and what a resource says of it.
type errorClass struct {
	// what names the error in a case's reason.
	what    string
	wrap    func(error) error
	reason  xpv2.ConditionReason
	meaning string
}

// errorClasses returns the named classes: each operation's tests check the
// classes it may meet.
func errorClasses(names ...string) map[string]errorClass {
	all := map[string]errorClass{
		"QuotaError":        {what: "A quota error", wrap: backend.Quota, reason: "QuotaExceeded", meaning: meaningQuota},
		"TransientError":    {what: "A transient error", wrap: backend.Transient, reason: "TransientError", meaning: meaningTransient},
		"PermanentError":    {what: "A permanent error", wrap: backend.Permanent, reason: "PermanentError", meaning: meaningPermanent},
		"NotFoundError":     {what: "A part the call needs that does not exist (say, a network)", wrap: backend.NotFound, reason: "NotFound", meaning: meaningNotFound},
		"UnclassifiedError": {what: "An error no backend classified", wrap: func(err error) error { return err }, reason: "TransientError", meaning: meaningTransient},
	}
	classes := make(map[string]errorClass, len(names))
	for _, n := range names {
		classes[n] = all[n]
	}
	return classes
}

func TestExternalObserve(t *testing.T) {
	running := backend.Observation[kobs]{State: commonv1alpha1.StateRunning, Ready: true, Endpoint: extEndpoint, UpToDate: true}
	withState := func(s commonv1alpha1.InstanceState) backend.Observation[kobs] {
		o := running
		o.State, o.Ready = s, false
		return o
	}
	// comingUp is a new instance still coming up, nothing wrong.
	comingUp := running
	comingUp.Ready, comingUp.Creating, comingUp.Message, comingUp.State = false, true, "0 of 1 replicas available", commonv1alpha1.StatePending
	withCreds := managed.ConnectionDetails{
		ConnectionEndpoint: []byte(extEndpoint),
		ConnectionPort:     []byte("3128"),
		ConnectionUsername: []byte("alice"),
		ConnectionPassword: []byte("s3cret"),
		ConnectionURL:      []byte("http://alice:s3cret@" + extEndpoint),
	}
	noCreds := managed.ConnectionDetails{
		ConnectionEndpoint: []byte(extEndpoint),
		ConnectionPort:     []byte("3128"),
		ConnectionURL:      []byte("http://" + extEndpoint),
	}
	notFoundGet := test.NewMockGetFn(kerrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "web-kubernetesproxy-credentials"))
	// An observe-only resource must write nothing: neither a Secret nor the
	// backend (Fns has no Create, Update or Delete set, so those panic).
	noCreate := test.NewMockCreateFn(errors.New("Observe must not create a Secret"))
	errMissing := kerrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "creds")

	type fields struct {
		kube    client.Client
		backend backend.Fns[kparams, kobs]
	}
	type want struct {
		o          managed.ExternalObservation
		err        error
		conditions []xpv2.Condition
		// unobserved: status.atProvider is left as it was (empty).
		unobserved bool
	}
	type observeCase struct {
		reason string
		fields fields
		mg     *v1alpha1.KubernetesProxy
		want   want
	}
	cases := map[string]observeCase{
		"NotFound": {
			reason: "A NotFound instance does not exist, so the managed reconciler creates it; no condition changes.",
			fields: fields{
				kube:    &test.MockClient{MockGet: givenSecret(alice)},
				backend: backend.Fns[kparams, kobs]{ObserveFn: failing(backend.NotFound(errBoom))},
			},
			mg:   extMR(),
			want: want{o: managed.ExternalObservation{ResourceExists: false}},
		},
		"ReadyWithConnectionDetails": {
			reason: "A ready instance is Available and publishes endpoint, port, username, password and a proxy URL.",
			fields: fields{
				kube:    &test.MockClient{MockGet: givenSecret(alice)},
				backend: backend.Fns[kparams, kobs]{ObserveFn: observed(alice, running)},
			},
			mg: extMR(),
			want: want{
				o:          managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true, ConnectionDetails: withCreds},
				conditions: []xpv2.Condition{xpv2.Available(), provisionedTrue()},
			},
		},
		"NotUpToDate": {
			reason: "An instance that differs from the spec is not up to date, and its diff is passed on for the debug log.",
			fields: fields{
				kube: &test.MockClient{MockGet: givenSecret(alice)},
				backend: backend.Fns[kparams, kobs]{ObserveFn: observed(alice, func() backend.Observation[kobs] {
					o := running
					o.UpToDate, o.Diff = false, "allowedDestinations differ"
					return o
				}())},
			},
			mg: extMR(),
			want: want{
				o:          managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: false, ConnectionDetails: withCreds, Diff: "allowedDestinations differ"},
				conditions: []xpv2.Condition{xpv2.Available(), provisionedTrue()},
			},
		},
		"UnreadyMessage": {
			reason: "An instance that is not ready yet says why on the Ready condition.",
			fields: fields{
				kube: &test.MockClient{MockGet: givenSecret(alice)},
				backend: backend.Fns[kparams, kobs]{ObserveFn: observed(alice, func() backend.Observation[kobs] {
					o := running
					o.Ready, o.Message = false, "1 of 2 replicas available"
					return o
				}())},
			},
			mg: extMR(),
			want: want{
				o:          managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true, ConnectionDetails: withCreds},
				conditions: []xpv2.Condition{xpv2.Unavailable().WithMessage("1 of 2 replicas available"), provisionedTrue()},
			},
		},
		"Stopped": {
			reason: "A stopped instance is reported not up to date, so Update replaces it, and Ready says Replacing.",
			fields: fields{
				kube:    &test.MockClient{MockGet: givenSecret(alice)},
				backend: backend.Fns[kparams, kobs]{ObserveFn: observed(alice, withState(commonv1alpha1.StateStopped))},
			},
			mg: extMR(),
			want: want{
				o: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: false, ConnectionDetails: withCreds},
				conditions: []xpv2.Condition{
					{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: ConditionReasonReplacing, Message: "instance is Stopped: replacing it"},
					provisionedTrue(),
				},
			},
		},
		"StillCreating": {
			reason: "A new instance still coming up keeps the status Create wrote (Creating, no observation): no status write until it is Ready.",
			fields: fields{
				kube:    &test.MockClient{MockGet: givenSecret(alice)},
				backend: backend.Fns[kparams, kobs]{ObserveFn: observed(alice, comingUp)},
			},
			mg: extMR(func(mg *v1alpha1.KubernetesProxy) { mg.SetConditions(xpv2.Creating()) }),
			want: want{
				o:          managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true, ConnectionDetails: withCreds},
				conditions: []xpv2.Condition{xpv2.Creating()},
				unobserved: true,
			},
		},
		"CreatingAfterReady": {
			reason: "An instance that was Ready says what is wrong, even if the backend thinks it new.",
			fields: fields{
				kube:    &test.MockClient{MockGet: givenSecret(alice)},
				backend: backend.Fns[kparams, kobs]{ObserveFn: observed(alice, comingUp)},
			},
			mg: extMR(func(mg *v1alpha1.KubernetesProxy) { mg.SetConditions(xpv2.Available()) }),
			want: want{
				o:          managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true, ConnectionDetails: withCreds},
				conditions: []xpv2.Condition{xpv2.Unavailable().WithMessage("0 of 1 replicas available"), provisionedTrue()},
			},
		},
		"Terminated": {
			reason: "A terminated instance is replaced like a stopped one.",
			fields: fields{
				kube:    &test.MockClient{MockGet: givenSecret(alice)},
				backend: backend.Fns[kparams, kobs]{ObserveFn: observed(alice, withState(commonv1alpha1.StateTerminated))},
			},
			mg: extMR(),
			want: want{
				o: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: false, ConnectionDetails: withCreds},
				conditions: []xpv2.Condition{
					{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: ConditionReasonReplacing, Message: "instance is Terminated: replacing it"},
					provisionedTrue(),
				},
			},
		},
		"NoEndpoint": {
			reason: "Without an endpoint there is nothing to connect to, so no connection details are published.",
			fields: fields{
				kube: &test.MockClient{MockGet: givenSecret(alice)},
				backend: backend.Fns[kparams, kobs]{ObserveFn: observed(alice, func() backend.Observation[kobs] {
					o := running
					o.Ready, o.Endpoint, o.Message = false, "", "waiting for an address"
					return o
				}())},
			},
			mg: extMR(),
			want: want{
				o:          managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				conditions: []xpv2.Condition{xpv2.Unavailable().WithMessage("waiting for an address"), provisionedTrue()},
			},
		},
		"ObserveOnlyGeneratesNothing": {
			reason: "An observe-only resource without generated credentials neither makes them nor publishes empty ones.",
			fields: fields{
				kube:    &test.MockClient{MockGet: notFoundGet, MockCreate: noCreate, MockScheme: test.NewMockSchemeFn(extScheme(t))},
				backend: backend.Fns[kparams, kobs]{ObserveFn: observed(backend.Credentials{}, running)},
			},
			mg: extMR(withGenerated(), withPolicies(xpv2.ManagementActionObserve)),
			want: want{
				o:          managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true, ConnectionDetails: noCreds},
				conditions: []xpv2.Condition{xpv2.Available(), provisionedTrue()},
			},
		},
		"DeletingNeedsNoCredentials": {
			reason: "A resource being deleted is observed without reading its credentials Secret, which may be gone already.",
			fields: fields{
				kube:    &test.MockClient{MockGet: test.NewMockGetFn(errors.New("Observe of a deleted resource must not read Secrets"))},
				backend: backend.Fns[kparams, kobs]{ObserveFn: observed(backend.Credentials{}, running)},
			},
			mg: extMR(withDeletion()),
			want: want{
				o:          managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true, ConnectionDetails: noCreds},
				conditions: []xpv2.Condition{xpv2.Available(), provisionedTrue()},
			},
		},
		"MissingCredentialsSecret": {
			reason: "A missing credentialsSecretRef Secret is the user's to fix: Provisioned says PermanentError.",
			fields: fields{
				kube: &test.MockClient{MockGet: test.NewMockGetFn(errMissing)},
			},
			mg: extMR(),
			want: want{
				err:        errors.Wrap(backend.Permanent(errors.Wrapf(errMissing, errFmtGetCredentials, "creds")), errObserve+": "+meaningPermanent),
				conditions: []xpv2.Condition{provisionedFalse("PermanentError", meaningPermanent)},
			},
		},
	}
	for name, c := range errorClasses("QuotaError", "TransientError", "PermanentError", "UnclassifiedError") {
		cases[name] = observeCase{
			reason: c.what + " is recorded as Provisioned reason " + string(c.reason) + ".",
			fields: fields{kube: &test.MockClient{MockGet: givenSecret(alice)}, backend: backend.Fns[kparams, kobs]{ObserveFn: failing(c.wrap(errBoom))}},
			mg:     extMR(),
			want:   want{err: errors.Wrap(c.wrap(errBoom), errObserve+": "+c.meaning), conditions: []xpv2.Condition{provisionedFalse(c.reason, c.meaning)}},
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := NewExternal[*v1alpha1.KubernetesProxy, kparams, kobs](testKind{}, tc.fields.backend, tc.fields.kube, "test", testKey)
			got, err := e.Observe(t.Context(), tc.mg)
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\nObserve(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.o, got); diff != "" {
				t.Errorf("%s\nObserve(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.conditions, tc.mg.Status.Conditions, test.EquateConditions()); diff != "" {
				t.Errorf("%s\nObserve(...): -want conditions, +got conditions:\n%s", tc.reason, diff)
			}
			if observed := tc.mg.Status.AtProvider.Endpoint != ""; tc.want.unobserved && observed {
				t.Errorf("%s\nObserve(...): status.atProvider was written: %+v", tc.reason, tc.mg.Status.AtProvider)
			}
		})
	}
}

// statusPatches counts the status patches persisted makes.
type statusPatches struct{ n int }

func (p *statusPatches) fn() test.MockSubResourcePatchFn {
	return func(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
		p.n++
		return nil
	}
}

// writeFn is a backend Create, Update or Delete that checks the credentials
// it is given and returns err.
func writeFn(want backend.Credentials, err error) writeFunc {
	return func(_ context.Context, d backend.Desired[kparams]) error {
		if d.Credentials != want {
			return errors.Errorf("got credentials %q, want %q", d.Credentials.Username, want.Username)
		}
		if d.Name != backend.Name(backend.Owner{UID: extUID, Namespace: "team", Name: "web"}, testMaxName) {
			return errors.Errorf("unexpected instance name %q", d.Name)
		}
		return err
	}
}

// writeFunc is a backend's Create, Update or Delete.
type writeFunc = func(context.Context, backend.Desired[kparams]) error

// addClassCases adds to cases one case of op per named error class: the
// backend fails with it; the call returns it wrapped in errOp and its
// meaning, and saves the class's Provisioned condition once. Create and
// Update pass the credentials from the Secret to the backend; Delete, of a resource
// being deleted, reads no Secret (a missing credentials Secret must not block
// the deletion of an instance) and passes none.
func addClassCases(cases map[string]writeCase, op, errOp string, fns func(writeFunc) backend.Fns[kparams, kobs], names ...string) {
	get, creds, mods := givenSecret(alice), alice, []mgOption(nil)
	if op == "Delete" {
		get, creds, mods = test.NewMockGetFn(errors.New("Delete must not read Secrets")), backend.Credentials{}, []mgOption{withDeletion()}
	}
	for name, c := range errorClasses(names...) {
		cases[name] = writeCase{
			reason:         c.what + " on " + op + " is saved as Provisioned reason " + string(c.reason) + ".",
			kube:           &test.MockClient{MockGet: get},
			backend:        fns(writeFn(creds, c.wrap(errBoom))),
			mg:             extMR(mods...),
			wantErr:        errors.Wrap(c.wrap(errBoom), errOp+": "+c.meaning),
			wantConditions: []xpv2.Condition{provisionedFalse(c.reason, c.meaning)},
			wantPatches:    1,
		}
	}
}

// writeCase is one case of Create, Update or Delete.
type writeCase struct {
	reason  string
	kube    *test.MockClient
	backend backend.Fns[kparams, kobs]
	mg      *v1alpha1.KubernetesProxy
	// wantErr is the error, wantConditions the conditions after the call,
	// and wantPatches how often the Provisioned condition was saved.
	wantErr        error
	wantConditions []xpv2.Condition
	wantPatches    int
}

func runWriteCases(t *testing.T, op string, call func(*External[*v1alpha1.KubernetesProxy, kparams, kobs], *v1alpha1.KubernetesProxy) error, cases map[string]writeCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := &statusPatches{}
			tc.kube.MockStatusPatch = p.fn()
			e := NewExternal[*v1alpha1.KubernetesProxy, kparams, kobs](testKind{}, tc.backend, tc.kube, "test", testKey)
			err := call(e, tc.mg)
			if diff := cmp.Diff(tc.wantErr, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\n%s(...): -want error, +got error:\n%s", tc.reason, op, diff)
			}
			if diff := cmp.Diff(tc.wantConditions, tc.mg.Status.Conditions, test.EquateConditions()); diff != "" {
				t.Errorf("%s\n%s(...): -want conditions, +got conditions:\n%s", tc.reason, op, diff)
			}
			if p.n != tc.wantPatches {
				t.Errorf("%s\n%s(...): want %d status patches, got %d", tc.reason, op, tc.wantPatches, p.n)
			}
		})
	}
}

func TestExternalCreate(t *testing.T) {
	name := backend.Name(backend.Owner{UID: extUID, Namespace: "team", Name: "web"}, testMaxName)
	// Generated credentials are derived: Create writes no Secret.
	generated := backend.Credentials{Username: GeneratedUsername, Password: derivedPassword(testKey, v1alpha1.KubernetesProxyKind, extUID, ""), Generated: true}
	cases := map[string]writeCase{
		"Success": {
			reason:  "Create passes the given credentials to the backend and saves no condition.",
			kube:    &test.MockClient{MockGet: givenSecret(alice)},
			backend: backend.Fns[kparams, kobs]{CreateFn: writeFn(alice, nil)},
			mg:      extMR(),
		},
		"GeneratedCredentials": {
			reason: "Create derives credentials, writes no Secret, and passes them to the backend.",
			kube: &test.MockClient{
				MockGet:    test.NewMockGetFn(kerrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "web-kubernetesproxy-credentials")),
				MockCreate: test.NewMockCreateFn(errors.New("Create must not write a Secret for generated credentials")),
				MockScheme: test.NewMockSchemeFn(extScheme(t)),
			},
			backend: backend.Fns[kparams, kobs]{CreateFn: func(_ context.Context, d backend.Desired[kparams]) error {
				if d.Credentials != generated {
					return errors.Errorf("Create got credentials %+v, want the derived ones", d.Credentials)
				}
				return nil
			}},
			mg: extMR(withGenerated()),
		},
	}
	addClassCases(cases, "Create", errCreate, func(fn writeFunc) backend.Fns[kparams, kobs] { return backend.Fns[kparams, kobs]{CreateFn: fn} },
		"QuotaError", "TransientError", "PermanentError", "NotFoundError", "UnclassifiedError")
	runWriteCases(t, "Create", func(e *External[*v1alpha1.KubernetesProxy, kparams, kobs], mg *v1alpha1.KubernetesProxy) error {
		_, err := e.Create(t.Context(), mg)
		if got := meta.GetExternalName(mg); got != name {
			t.Errorf("Create(...): want external name %q, got %q", name, got)
		}
		return err
	}, cases)
}

func TestExternalUpdate(t *testing.T) {
	errMissing := kerrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "creds")
	cases := map[string]writeCase{
		"Success": {
			reason:  "Update passes the given credentials to the backend.",
			kube:    &test.MockClient{MockGet: givenSecret(alice)},
			backend: backend.Fns[kparams, kobs]{UpdateFn: writeFn(alice, nil)},
			mg:      extMR(),
		},
		"MissingCredentialsSecret": {
			reason:         "Update without its credentials Secret calls no backend, and saves Provisioned reason PermanentError.",
			kube:           &test.MockClient{MockGet: test.NewMockGetFn(errMissing)},
			mg:             extMR(),
			wantErr:        errors.Wrap(backend.Permanent(errors.Wrapf(errMissing, errFmtGetCredentials, "creds")), errUpdate+": "+meaningPermanent),
			wantConditions: []xpv2.Condition{provisionedFalse("PermanentError", meaningPermanent)},
			wantPatches:    1,
		},
	}
	addClassCases(cases, "Update", errUpdate, func(fn writeFunc) backend.Fns[kparams, kobs] { return backend.Fns[kparams, kobs]{UpdateFn: fn} },
		"QuotaError")
	runWriteCases(t, "Update", func(e *External[*v1alpha1.KubernetesProxy, kparams, kobs], mg *v1alpha1.KubernetesProxy) error {
		_, err := e.Update(t.Context(), mg)
		return err
	}, cases)
}

func TestExternalDelete(t *testing.T) {
	// Delete must not read Secrets: a missing credentials Secret must not
	// block the deletion of an instance.
	noGet := test.NewMockGetFn(errors.New("Delete must not read Secrets"))
	cases := map[string]writeCase{
		"Success": {
			reason:  "Delete needs no credentials.",
			kube:    &test.MockClient{MockGet: noGet},
			backend: backend.Fns[kparams, kobs]{DeleteFn: writeFn(backend.Credentials{}, nil)},
			mg:      extMR(withDeletion()),
		},
	}
	addClassCases(cases, "Delete", errDelete, func(fn writeFunc) backend.Fns[kparams, kobs] { return backend.Fns[kparams, kobs]{DeleteFn: fn} },
		"TransientError", "PermanentError")
	runWriteCases(t, "Delete", func(e *External[*v1alpha1.KubernetesProxy, kparams, kobs], mg *v1alpha1.KubernetesProxy) error {
		_, err := e.Delete(t.Context(), mg)
		return err
	}, cases)
}

// TestExternalDeleteNotFound checks the promise of backend.ClassNotFound and
// docs/backends.md ("NotFound ... Delete: success").
func TestExternalDeleteNotFound(t *testing.T) {
	runWriteCases(t, "Delete", func(e *External[*v1alpha1.KubernetesProxy, kparams, kobs], mg *v1alpha1.KubernetesProxy) error {
		_, err := e.Delete(t.Context(), mg)
		return err
	}, map[string]writeCase{
		"NotFound": {
			reason:  "Deleting an instance, or a part, that is already gone is success.",
			kube:    &test.MockClient{MockGet: test.NewMockGetFn(errors.New("Delete must not read Secrets"))},
			backend: backend.Fns[kparams, kobs]{DeleteFn: writeFn(backend.Credentials{}, backend.NotFound(errBoom))},
			mg:      extMR(withDeletion()),
		},
	})
}

func TestObserveNotFoundFinalizer(t *testing.T) {
	cases := map[string]struct {
		reason string
		mg     *v1alpha1.KubernetesProxy
		want   []string
	}{
		"WillCreate": {
			reason: "A missing instance the reconciler will create gets the finalizer in memory, saved with the create-pending annotation in one write.",
			mg:     extMR(),
			want:   []string{managed.FinalizerName},
		},
		"ObserveOnly": {
			reason: "A resource that may not create its instance gets no finalizer from Observe.",
			mg:     extMR(withPolicies(xpv2.ManagementActionObserve)),
		},
		"Deleted": {
			reason: "A resource being deleted never gets a finalizer back.",
			mg:     extMR(withDeletion()),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := backend.Fns[kparams, kobs]{ObserveFn: failing(backend.NotFound(errBoom))}
			e := NewExternal[*v1alpha1.KubernetesProxy, kparams, kobs](testKind{}, b, &test.MockClient{MockGet: givenSecret(alice)}, "test", testKey)
			if _, err := e.Observe(t.Context(), tc.mg); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, tc.mg.GetFinalizers()); diff != "" {
				t.Errorf("%s\nfinalizers: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
