/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kubernetes"
	"github.com/egressproxy/provider-egressproxy/internal/controller/config"
	"github.com/egressproxy/provider-egressproxy/internal/controller/kubernetesproxy"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// TestWatchRepairsDrift shows watches instead of polling: with the poll at
// one hour, a deleted or edited Deployment of a proxy in the target cluster
// (the same API server) is repaired within seconds.
func TestWatchRepairsDrift(t *testing.T) {
	e := kube.Shared(t)
	ns := e.Namespace(t, "watch")
	var (
		once sync.Once
		b    *kubernetes.Backend
		err  error
	)
	t.Cleanup(func() {
		if b != nil {
			_ = b.Close()
		}
	})
	f := func(context.Context, client.Client, proxy.Config) (backend.Backend[params, obs], error) {
		once.Do(func() { b, err = kubernetes.NewForConfig(e.Config) })
		return b, err
	}
	e.RunManager(t, func(mgr ctrl.Manager, o controller.Options) error {
		o.PollInterval = time.Hour
		if err := config.Setup(mgr, o); err != nil {
			return err
		}
		return kubernetesproxy.Controller.Setup(mgr, proxy.Options{Options: o, ProviderInstance: "test", CredentialsKey: []byte("a test key of thirty-two bytes..")}, f)
	})
	ctx := t.Context()
	if err := e.Client.Create(ctx, providerConfig(ns)); err != nil {
		t.Fatal(err)
	}
	mg := kubernetesProxy(ns, "proxy")
	// An empty allowlist of namespaces allows the resource's own.
	mg.Spec.ForProvider.Namespace = ns
	if err := e.Client.Create(ctx, mg); err != nil {
		t.Fatal(err)
	}
	nn := types.NamespacedName{Namespace: ns, Name: "proxy"}
	var dep appsv1.Deployment
	kube.Eventually(t, "the proxy's Deployment", func() (bool, string) {
		got := &v1alpha1.KubernetesProxy{}
		if err := e.Client.Get(ctx, nn, got); err != nil || meta.GetExternalName(got) == "" {
			return false, fmt.Sprint("no external name yet: ", err)
		}
		err := e.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: meta.GetExternalName(got)}, &dep)
		return err == nil, fmt.Sprint(err)
	})
	// Let the creation settle: its own events have been handled.
	time.Sleep(2 * time.Second)

	cases := []struct {
		what   string
		change func() error
		fixed  func(got *appsv1.Deployment) bool
	}{
		{
			what:   "a deleted Deployment is made again",
			change: func() error { return e.Client.Delete(ctx, dep.DeepCopy()) },
			fixed:  func(got *appsv1.Deployment) bool { return got.UID != dep.UID },
		},
		{
			what: "an edited image is reset",
			change: func() error {
				if err := e.Client.Get(ctx, client.ObjectKeyFromObject(&dep), &dep); err != nil {
					return err
				}
				dep.Spec.Template.Spec.Containers[0].Image = "example.org/not-squid:1"
				return e.Client.Update(ctx, &dep)
			},
			fixed: func(got *appsv1.Deployment) bool {
				return got.Spec.Template.Spec.Containers[0].Image != "example.org/not-squid:1"
			},
		},
	}
	for _, tc := range cases {
		if err := tc.change(); err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		start := time.Now()
		deadline := start.Add(15 * time.Second)
		for {
			got := &appsv1.Deployment{}
			err := e.Client.Get(ctx, client.ObjectKeyFromObject(&dep), got)
			if err == nil && tc.fixed(got) {
				t.Logf("%s after %s", tc.what, time.Since(start).Round(10*time.Millisecond))
				dep = *got
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("with the poll at 1h, not repaired within 15 s: %s (%v)", tc.what, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
