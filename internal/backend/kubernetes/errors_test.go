/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-cmp/cmp"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

func TestClassify(t *testing.T) {
	deployments := schema.GroupResource{Group: "apps", Resource: "deployments"}
	get := call{verb: verbGet, kind: kindDeployment, resource: resDeployments, namespace: testNS, name: testName}
	create := get
	create.verb = verbCreate
	type want struct {
		class   backend.Class
		message string
	}
	cases := map[string]struct {
		reason string
		err    error
		c      call
		want   want
	}{
		"Nil": {
			reason: "No error, no class.",
			c:      get,
			want:   want{class: backend.ClassNone},
		},
		"NotFound": {
			reason: "A missing object is NotFound.",
			err:    kerrors.NewNotFound(deployments, testName),
			c:      get,
			want:   want{class: backend.ClassNotFound, message: "cannot get Deployment proxies/" + testName},
		},
		"NamespaceMissing": {
			reason: "Create fails with NotFound only when the namespace is missing, which the user must fix.",
			err:    kerrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, testNS),
			c:      create,
			want:   want{class: backend.ClassPermanent, message: `namespace "proxies" does not exist in the target cluster`},
		},
		"Forbidden": {
			reason: "Missing RBAC is Permanent and names the verb and resource.",
			err:    kerrors.NewForbidden(deployments, testName, errors.New(`User "system:serviceaccount:x:y" cannot create resource "deployments"`)),
			c:      create,
			want:   want{class: backend.ClassPermanent, message: "may not create deployments.apps in namespace proxies"},
		},
		"QuotaExceeded": {
			reason: "An exceeded ResourceQuota is Quota.",
			err:    kerrors.NewForbidden(deployments, testName, errors.New("exceeded quota: q, requested: count/deployments.apps=1, used: count/deployments.apps=0, limited: count/deployments.apps=0")),
			c:      create,
			want:   want{class: backend.ClassQuota, message: "cannot create Deployment"},
		},
		"QuotaUnknown": {
			reason: "A quota the controller has not counted yet clears up by itself.",
			err:    kerrors.NewForbidden(deployments, testName, errors.New("status unknown for quota: q, resource: count/deployments.apps")),
			c:      create,
			want:   want{class: backend.ClassTransient, message: "cannot create Deployment"},
		},
		"Unauthorized": {
			reason: "Rejected credentials are Permanent.",
			err:    kerrors.NewUnauthorized("Unauthorized"),
			c:      get,
			want:   want{class: backend.ClassPermanent, message: "rejected the provider config's credentials"},
		},
		"Invalid": {
			reason: "An invalid object is Permanent.",
			err: kerrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, testName,
				field.ErrorList{field.Invalid(field.NewPath("spec", "selector"), "x", "field is immutable")}),
			c:    create,
			want: want{class: backend.ClassPermanent, message: "refused Deployment proxies/" + testName + " as invalid"},
		},
		"Conflict": {
			reason: "A conflict is Transient: the next reconcile reads the new version.",
			err:    kerrors.NewConflict(deployments, testName, errors.New("modified")),
			c:      get,
			want:   want{class: backend.ClassTransient, message: "cannot get Deployment"},
		},
		"ServerError": {
			reason: "5xx, timeouts and throttling are Transient.",
			err:    kerrors.NewServiceUnavailable("etcd leader changed"),
			c:      get,
			want:   want{class: backend.ClassTransient, message: "cannot get Deployment"},
		},
		"Deadline": {
			reason: "A call cut by its deadline is Transient.",
			err:    context.DeadlineExceeded,
			c:      get,
			want:   want{class: backend.ClassTransient, message: "cannot get Deployment"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := classify(tc.err, tc.c)
			got := want{class: backend.ClassOf(err), message: tc.want.message}
			if err != nil && !strings.Contains(err.Error(), tc.want.message) {
				got.message = err.Error()
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nclassify(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
