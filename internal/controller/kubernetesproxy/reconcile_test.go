/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetesproxy

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/controller/config"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// This test runs the whole KubernetesProxy controller (managed reconciler,
// connector, factory reading a kubeconfig Secret, Kubernetes backend) on a
// real kube-apiserver that is also the target cluster. There is no kubelet,
// so the test marks the Deployment available itself.

func startProvider(t *testing.T, e *kube.Env) {
	t.Helper()
	ctrl.SetLogger(logr.Discard())
	e.RunManager(t, func(mgr ctrl.Manager, o controller.Options) error {
		if err := config.Setup(mgr, o); err != nil {
			return err
		}
		return Controller.Setup(mgr, proxy.Options{Options: o, ProviderInstance: "envtest", CredentialsKey: []byte("a test key of thirty-two bytes.."), Timeout: time.Minute}, NewFactory())
	})
}

func kubeconfigConfig(t *testing.T, e *kube.Env, ns, name string, kubeconfig []byte, allowedNamespaces ...string) {
	t.Helper()
	ctx := t.Context()
	if err := e.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data:       map[string][]byte{"kubeconfig": kubeconfig},
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(ctx, &v1alpha1.ProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ProviderConfigSpec{Credentials: v1alpha1.Credentials{
			Source:    v1alpha1.CredentialsSourceSecret,
			SecretRef: &commonv1alpha1.SecretKeySelector{SecretReference: commonv1alpha1.SecretReference{Name: name}, Key: "kubeconfig"},
		}, AllowedNamespaces: allowedNamespaces},
	}); err != nil {
		t.Fatal(err)
	}
}

func managedProxy(ns, name, config, target string) *v1alpha1.KubernetesProxy {
	return &v1alpha1.KubernetesProxy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.KubernetesProxySpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{
				ProviderConfigReference:          &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: config},
				WriteConnectionSecretToReference: &xpv2.LocalSecretReference{Name: name + "-conn"},
			},
			ForProvider: v1alpha1.KubernetesProxyParameters{
				Namespace: target,
				Replicas:  ptr.To[int32](2),
				ProxyParameters: commonv1alpha1.ProxyParameters{
					AllowedClientCIDRs:  []string{"10.0.0.0/8"},
					AllowedDestinations: []string{"api.example.com"},
				},
			},
		},
	}
}

func TestKubernetesProxyThroughTheManagedReconciler(t *testing.T) {
	e := kube.Start(t)
	startProvider(t, e)
	ctx := t.Context()
	ns, target := e.Namespace(t, "team"), e.Namespace(t, "egress")
	kc, err := os.ReadFile(e.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigConfig(t, e, ns, "target", kc, target)
	kubeconfigConfig(t, e, ns, "broken", []byte("apiVersion: v1\nkind: Config\nclusters: {not: a list}\n"), target)
	kubeconfigConfig(t, e, ns, "default", kc)

	mg := managedProxy(ns, "proxy", "target", target)
	if err := e.Client.Create(ctx, mg); err != nil {
		t.Fatal(err)
	}
	owned := client.MatchingLabels{backend.KubernetesLabelKeys.ManagedBy: backend.ManagedByValue}

	// The backend creates the proxy in the target namespace; with no
	// kubelet, mark its Deployment available as the Deployment controller
	// would.
	var dep appsv1.Deployment
	kube.Eventually(t, "the proxy Deployment", func() (bool, string) {
		l := &appsv1.DeploymentList{}
		err := e.Client.List(ctx, l, client.InNamespace(target), owned)
		if err != nil || len(l.Items) != 1 {
			return false, fmt.Sprint(len(l.Items), err)
		}
		dep = l.Items[0]
		return true, ""
	})
	dep.Status = appsv1.DeploymentStatus{
		ObservedGeneration: dep.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}},
	}
	if err := e.Client.Status().Update(ctx, &dep); err != nil {
		t.Fatal(err)
	}

	nn := types.NamespacedName{Namespace: ns, Name: "proxy"}
	kube.Eventually(t, "Ready=True", func() (bool, string) {
		got := &v1alpha1.KubernetesProxy{}
		if err := e.Client.Get(ctx, nn, got); err != nil {
			return false, err.Error()
		}
		c := got.GetCondition(xpv2.TypeReady)
		return c.Status == corev1.ConditionTrue, fmt.Sprint(c, got.Status.AtProvider)
	})
	conn := &corev1.Secret{}
	if err := e.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "proxy-conn"}, conn); err != nil {
		t.Fatalf("connection Secret: %v", err)
	}
	wantHost := dep.Name + "." + target + ".svc:3128"
	if got := string(conn.Data["endpoint"]); got != wantHost {
		t.Errorf("connection endpoint: want %q, got %q", wantHost, got)
	}
	if u := string(conn.Data["url"]); !strings.HasPrefix(u, "http://egressproxy:") || !strings.HasSuffix(u, "@"+wantHost) {
		t.Errorf("connection url: want http://egressproxy:<password>@%s, got a URL of another shape", wantHost)
	}
	svcs, cms, secs := &corev1.ServiceList{}, &corev1.ConfigMapList{}, &corev1.SecretList{}
	for _, l := range []client.ObjectList{svcs, cms, secs} {
		if err := e.Client.List(ctx, l, client.InNamespace(target), owned); err != nil {
			t.Fatal(err)
		}
	}
	if len(svcs.Items) != 1 || len(cms.Items) != 1 || len(secs.Items) != 1 {
		t.Errorf("target objects with ownership labels: want a Service, a ConfigMap and a Secret, got %d, %d, %d",
			len(svcs.Items), len(cms.Items), len(secs.Items))
	}

	// A broken kubeconfig Secret says what is wrong, where.
	bad := managedProxy(ns, "bad", "broken", target)
	if err := e.Client.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	kube.Eventually(t, "Synced=False naming the broken kubeconfig", func() (bool, string) {
		got := &v1alpha1.KubernetesProxy{}
		if err := e.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "bad"}, got); err != nil {
			return false, err.Error()
		}
		c := got.GetCondition(xpv2.TypeSynced)
		return c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "cannot parse the kubeconfig in Secret "+ns+"/broken"), c.Message
	})

	// A namespace the config does not allow: refused before any object is
	// made, with the field and the config named.
	refused := managedProxy(ns, "refused", "default", target)
	if err := e.Client.Create(ctx, refused); err != nil {
		t.Fatal(err)
	}
	wantMsg := `spec.forProvider.namespace "` + target + `" is not allowed by ProviderConfig ` + ns + `/default`
	kube.Eventually(t, "Synced=False naming the refused namespace", func() (bool, string) {
		got := &v1alpha1.KubernetesProxy{}
		if err := e.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "refused"}, got); err != nil {
			return false, err.Error()
		}
		c := got.GetCondition(xpv2.TypeSynced)
		return c.Status == corev1.ConditionFalse && strings.Contains(c.Message, wantMsg), c.Message
	})

	// Deleting the resource removes everything it made in the target.
	if err := e.Client.Delete(ctx, mg); err != nil {
		t.Fatal(err)
	}
	kube.Eventually(t, "the target objects and the resource to be gone", func() (bool, string) {
		deps, svcs := &appsv1.DeploymentList{}, &corev1.ServiceList{}
		_ = e.Client.List(ctx, deps, client.InNamespace(target), owned)
		_ = e.Client.List(ctx, svcs, client.InNamespace(target), owned)
		err := e.Client.Get(ctx, nn, &v1alpha1.KubernetesProxy{})
		return len(deps.Items) == 0 && len(svcs.Items) == 0 && client.IgnoreNotFound(err) == nil && err != nil,
			fmt.Sprintf("%d deployments, %d services, get: %v", len(deps.Items), len(svcs.Items), err)
	})
}
