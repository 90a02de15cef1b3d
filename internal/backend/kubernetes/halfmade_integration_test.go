/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetes

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// TestIntegrationHalfMade stops Create between the Secret and the
// Deployment (a ResourceQuota refuses the Deployment, as a crash would
// leave it) and checks on a real API server that the instance is not
// reported gone: Delete then removes the ConfigMap and the Secret (the
// htpasswd), and Update, once the quota allows, makes the Deployment.
func TestIntegrationHalfMade(t *testing.T) {
	b, c, ns := realCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	d := desired(inNamespace(ns))
	k := client.ObjectKey{Namespace: ns, Name: testName}

	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-deployments"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/deployments.apps": resource.MustParse("0")}},
	}
	step(t, "create ResourceQuota", c.Create(ctx, q))
	// Without a quota controller, write the usage it would count.
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{"count/deployments.apps": resource.MustParse("0")}}
	step(t, "update ResourceQuota status", c.Status().Update(ctx, q))

	halfMade := func(t *testing.T) {
		t.Helper()
		if err := b.Create(ctx, d); backend.ClassOf(err) != backend.ClassQuota {
			t.Fatalf("Create over quota = %v, want a Quota error", err)
		}
		o, err := b.Observe(ctx, d)
		want := "Deployment " + ns + "/" + testName + " is missing; ConfigMap and Secret exist"
		if err != nil || o.State != commonv1alpha1.StatePending || o.UpToDate || o.Ready || o.Message != want {
			t.Fatalf("Observe of a half made instance = %+v, %v; want Pending, not up to date, %q", o, err, want)
		}
	}

	t.Run("Deleted", func(t *testing.T) {
		halfMade(t)
		for range 3 {
			if _, err := b.Observe(ctx, d); backend.IsNotFound(err) {
				break
			}
			step(t, "Delete", b.Delete(ctx, d))
		}
		if _, err := b.Observe(ctx, d); !backend.IsNotFound(err) {
			t.Fatalf("Observe after Delete = %v, want NotFound", err)
		}
		for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}} {
			if err := c.Get(ctx, k, obj); !kerrors.IsNotFound(err) {
				t.Errorf("%T is left after Delete: %v", obj, err)
			}
		}
	})

	t.Run("Completed", func(t *testing.T) {
		halfMade(t)
		step(t, "delete ResourceQuota", c.Delete(ctx, q))
		// The quota admission plugin reads quotas from an informer.
		var err error
		for range 50 {
			if err = b.Update(ctx, d); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		step(t, "Update", err)
		step(t, "get Deployment", c.Get(ctx, k, &appsv1.Deployment{}))
		if o := observe(ctx, t, b, d); !o.UpToDate || o.State != commonv1alpha1.StatePending {
			t.Errorf("after Update: %+v; want up to date, waiting for its pods", o)
		}
	})
}
