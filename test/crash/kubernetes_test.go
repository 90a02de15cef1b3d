/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package crash

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
)

const (
	// proxyNamespace is the target namespace the proxies run in.
	proxyNamespace = "crash-proxies"
	kubeSecret     = "target-kubeconfig"
)

var _ = registerTarget(cluster.BackendKubernetes, registration{start: kubernetesTarget})

// kubernetesTarget makes the control plane the kubernetes backend's target
// cluster, reached through a reverse proxy on loopback whose holder can
// hold the response to the create of a proxy's Service, the last object
// Create makes.
func kubernetesTarget(t *testing.T, e *env) *target {
	t.Helper()
	ctx := t.Context()
	up, err := url.Parse(e.c.Config.Host)
	if err != nil || up.Scheme == "" {
		up, err = url.Parse("https://" + e.c.Config.Host)
	}
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rest.TransportFor(e.c.Config)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(up) },
		Transport:     tr,
		FlushInterval: -1,
	}
	createService := func(r *http.Request) bool {
		ok, _ := path.Match("/api/v1/namespaces/"+proxyNamespace+"/services", r.URL.Path)
		return ok && r.Method == http.MethodPost
	}
	// The garbage collector lists Deployments in every namespace.
	list := func(r *http.Request) bool {
		return r.URL.Path == "/apis/apps/v1/deployments" && r.Method == http.MethodGet && r.URL.Query().Get("watch") == ""
	}
	// Create makes the ConfigMap and the Secret, then the Deployment:
	// holding the Deployment's create leaves the first two.
	createDeployment := func(r *http.Request) bool {
		return r.URL.Path == "/apis/apps/v1/namespaces/"+proxyNamespace+"/deployments" && r.Method == http.MethodPost
	}
	h := newHolder(rp, createService, createDeployment, list)
	srv := httptest.NewUnstartedServer(h)
	srv.StartTLS()
	t.Cleanup(srv.Close)

	kc := clientcmdapi.NewConfig()
	kc.Clusters["target"] = &clientcmdapi.Cluster{
		Server:                   srv.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
	}
	// The reverse proxy authenticates to the apiserver itself.
	kc.AuthInfos["target"] = &clientcmdapi.AuthInfo{Token: "unused"}
	kc.Contexts["target"] = &clientcmdapi.Context{Cluster: "target", AuthInfo: "target"}
	kc.CurrentContext = "target"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: proxyNamespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: kubeSecret}, Data: map[string][]byte{"kubeconfig": b}},
	} {
		if err := e.c.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	pc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubernetes.m.egressproxy.io/v1alpha1",
		"kind":       "ClusterProviderConfig",
		"metadata":   map[string]any{"name": configName},
		"spec": map[string]any{
			"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{
				"name": kubeSecret, "namespace": secretNamespace, "key": "kubeconfig",
			}},
			// The proxies run in a namespace of their own, which is
			// easy to check for leftovers.
			"allowedNamespaces": []any{proxyNamespace},
		},
	}}
	if err := cluster.Apply(ctx, e.c.Client, pc); err != nil {
		t.Fatal(err)
	}
	kube := e.c.Client
	owned := client.MatchingLabels{backend.KubernetesLabelKeys.ManagedBy: backend.ManagedByValue}
	return &target{
		name:       "kubernetes",
		apiVersion: "kubernetes.m.egressproxy.io/v1alpha1",
		kind:       "KubernetesProxy",
		namespace:  "crash-kubernetes",
		forProvider: func() map[string]any {
			return map[string]any{
				"namespace":          proxyNamespace,
				"replicas":           int64(1),
				"allowedClientCIDRs": []any{"10.0.0.0/8"},
				"nodeSelector":       map[string]any{cluster.LabelEgressNode: "true"},
			}
		},
		hold: h.trap,
		instances: func(ctx context.Context) ([]instance, error) {
			l := &appsv1.DeploymentList{}
			if err := kube.List(ctx, l, owned); err != nil {
				return nil, err
			}
			var out []instance
			for _, d := range l.Items {
				out = append(out, instance{
					name:    d.Name,
					owner:   d.Labels[backend.KubernetesLabelKeys.OwnerUID],
					version: string(d.UID),
				})
			}
			return out, nil
		},
		leftovers: func(ctx context.Context) ([]string, error) {
			var out []string
			lists := map[string]client.ObjectList{
				"deployment": &appsv1.DeploymentList{}, "service": &corev1.ServiceList{},
				"configmap": &corev1.ConfigMapList{}, "secret": &corev1.SecretList{},
				"poddisruptionbudget": &policyv1.PodDisruptionBudgetList{},
			}
			for kind, l := range lists {
				if err := kube.List(ctx, l, client.InNamespace(proxyNamespace), owned); err != nil {
					return nil, err
				}
				items, err := extract(l)
				if err != nil {
					return nil, err
				}
				for _, name := range items {
					out = append(out, kind+" "+name)
				}
			}
			return out, nil
		},
	}
}

// extract returns the names of a list's items.
func extract(l client.ObjectList) ([]string, error) {
	objs, err := apimeta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		if m, ok := o.(metav1.Object); ok {
			out = append(out, m.GetName())
		}
	}
	return out, nil
}
