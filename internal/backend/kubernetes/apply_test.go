/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

func TestCreateIsIdempotent(t *testing.T) {
	d := desired()
	c := created(t, d)
	objs := []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}, &appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}}
	before := make([]string, len(objs))
	for i, o := range objs {
		before[i] = resourceVersion(t, c, o)
	}
	if err := New(c).Create(t.Context(), d); err != nil {
		t.Fatalf("second Create: %v", err)
	}
	for i, o := range objs {
		if got := resourceVersion(t, c, o); got != before[i] {
			t.Errorf("second Create changed %T (resourceVersion %s -> %s): it must adopt and keep unchanged objects", o, before[i], got)
		}
	}
}

func TestUpdate(t *testing.T) {
	type want struct {
		Class backend.Class
		// Message is a phrase the error must contain.
		Message string
		// RolledPods says whether the pod template changed.
		RolledPods bool
		UpToDate   bool
	}
	cases := map[string]struct {
		reason string
		mutate []mutation
		update backend.Desired[Params]
		check  func(t *testing.T, c client.Client)
		want   want
	}{
		"NoChange": {
			reason: "An up-to-date instance is left alone.",
			update: desired(),
			want:   want{UpToDate: true},
		},
		"ServiceDeleted": {
			reason: "A deleted Service is re-created.",
			mutate: []mutation{remove(&corev1.Service{})},
			update: desired(),
			want:   want{UpToDate: true},
		},
		"ReplicasEdited": {
			reason: "An edited replica count is reset without rolling the pods.",
			mutate: []mutation{edit(&appsv1.Deployment{}, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](7) })},
			update: desired(),
			want:   want{UpToDate: true},
		},
		"AllowlistChanged": {
			reason: "A new allowlist updates the ConfigMap and rolls the pods through the checksum.",
			update: desired(withDestinations(".example.org")),
			check: func(t *testing.T, c client.Client) {
				cm := &corev1.ConfigMap{}
				_ = c.Get(t.Context(), key(), cm)
				if !strings.Contains(cm.Data[keySquidConf], ".example.org") {
					t.Errorf("squid.conf lacks the new destination")
				}
			},
			want: want{UpToDate: true, RolledPods: true},
		},
		"PasswordRotated": {
			reason: "A new password rewrites the htpasswd and leaves the pods alone.",
			update: desired(withPassword("rotated")),
			check: func(t *testing.T, c client.Client) {
				s := &corev1.Secret{}
				_ = c.Get(t.Context(), key(), s)
				if !squid.HtpasswdMatches(s.Data[keyHtpasswd], testUser, "rotated") {
					t.Errorf("htpasswd does not accept the new password")
				}
			},
			want: want{UpToDate: true},
		},
		"ScaledToOne": {
			reason: "Scaling to one replica deletes the PodDisruptionBudget.",
			update: desired(withReplicas(1)),
			check: func(t *testing.T, c client.Client) {
				err := c.Get(t.Context(), key(), &policyv1.PodDisruptionBudget{})
				if !kerrors.IsNotFound(err) {
					t.Errorf("PodDisruptionBudget still exists (err %v)", err)
				}
			},
			want: want{UpToDate: true},
		},
		"ServiceOfAnotherOwner": {
			reason: "Another resource's Service is never taken over.",
			mutate: []mutation{foreign(&corev1.Service{})},
			update: desired(),
			want:   want{Class: backend.ClassPermanent, Message: "Service proxies/" + testName + " already exists and is not managed by this resource"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := created(t, desired())
			for _, m := range tc.mutate {
				m(t, c)
			}
			tmpl := func() string {
				dep := &appsv1.Deployment{}
				_ = c.Get(t.Context(), key(), dep)
				return dep.Spec.Template.Annotations[AnnotationConfigChecksum]
			}
			before := tmpl()
			err := New(c).Update(t.Context(), tc.update)
			got := want{Class: backend.ClassOf(err), Message: tc.want.Message, RolledPods: tmpl() != before}
			if err != nil && !strings.Contains(err.Error(), tc.want.Message) {
				got.Message = err.Error()
			}
			if err == nil {
				o, oerr := New(c).Observe(t.Context(), tc.update)
				if oerr != nil {
					t.Fatalf("Observe after Update: %v", oerr)
				}
				got.UpToDate = o.UpToDate
				if !o.UpToDate {
					t.Logf("diff after Update: %s", o.Diff)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nUpdate(...): -want, +got:\n%s", tc.reason, diff)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func TestCreateErrors(t *testing.T) {
	deployments := schema.GroupResource{Group: "apps", Resource: "deployments"}
	onDeployment := func(err error) interceptor.Funcs {
		return interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*appsv1.Deployment); ok {
				return err
			}
			return c.Create(ctx, obj, opts...)
		}}
	}
	cases := map[string]struct {
		reason string
		c      func(t *testing.T) client.Client
		d      backend.Desired[Params]
		want   backend.Class
		msg    string
	}{
		"Quota": {
			reason: "An exceeded ResourceQuota is Quota.",
			c: func(t *testing.T) client.Client {
				return failing(t, onDeployment(kerrors.NewForbidden(deployments, testName, errQuota())))
			},
			d: desired(), want: backend.ClassQuota, msg: "exceeded quota",
		},
		"Forbidden": {
			reason: "Missing RBAC is Permanent and names the verb and resource.",
			c: func(t *testing.T) client.Client {
				return failing(t, onDeployment(kerrors.NewForbidden(deployments, testName, errRBAC())))
			},
			d: desired(), want: backend.ClassPermanent, msg: "may not create deployments.apps in namespace proxies",
		},
		"DeploymentOfAnotherOwner": {
			reason: "Create never adopts another resource's Deployment.",
			c: func(t *testing.T) client.Client {
				c := created(t, desired())
				foreign(&appsv1.Deployment{})(t, c)
				return c
			},
			d: desired(), want: backend.ClassPermanent, msg: "Deployment proxies/" + testName + " already exists and is not managed by this resource",
		},
		"NoNamespace": {
			reason: "An empty namespace is Permanent.",
			c:      func(t *testing.T) client.Client { return fakeCluster(t) },
			d:      desired(func(d *backend.Desired[Params]) { d.Params.Namespace = "" }),
			want:   backend.ClassPermanent, msg: "forProvider.namespace is empty",
		},
		"BadPassword": {
			reason: "Credentials bcrypt cannot hash are Permanent, and the message holds no password.",
			c:      func(t *testing.T) client.Client { return fakeCluster(t) },
			d:      desired(withPassword(strings.Repeat("x", 80))),
			want:   backend.ClassPermanent, msg: "longer than 72 bytes",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := New(tc.c(t)).Create(t.Context(), tc.d)
			if diff := cmp.Diff(tc.want, backend.ClassOf(err)); diff != "" {
				t.Errorf("%s\nCreate(...) class: -want, +got:\n%s\nerror: %v", tc.reason, diff, err)
			}
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s\nCreate(...) = %v, want a message containing %q", tc.reason, err, tc.msg)
			}
			if err != nil && strings.Contains(err.Error(), tc.d.Credentials.Password) {
				t.Errorf("%s\nthe error holds the password", tc.reason)
			}
		})
	}
}

func errQuota() error {
	return kerrors.NewBadRequest("exceeded quota: q, requested: count/deployments.apps=1, used: count/deployments.apps=0, limited: count/deployments.apps=0")
}

func errRBAC() error {
	return kerrors.NewBadRequest(`User "system:serviceaccount:crossplane-system:provider" cannot create resource "deployments" in API group "apps"`)
}
