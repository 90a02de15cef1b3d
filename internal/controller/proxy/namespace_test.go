/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy_test

import (
	"fmt"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// TestNamespaceDeletionWithController deletes a team namespace holding a
// proxy, its ProviderConfig and the config's Secret on a control plane
// whose kube-controller-manager runs the namespace controller and the
// garbage collector, which delete everything in it at once. The namespace
// must go, and the proxy's instance must have been deleted with the
// config's credentials first.
func TestNamespaceDeletionWithController(t *testing.T) {
	if kube.BinDir() == "" {
		testenv.Missing(t, "the envtest binaries are not built (hack/tools.sh cached-envtest)")
	}
	testenv.Tool(t, "kube-controller-manager")
	testenv.Tool(t, "kube-scheduler")
	testenv.Tool(t, "kwok")
	c, err := cluster.StartBare(t.Context(), cluster.Options{Nodes: 1, Logf: t.Logf})
	if err != nil {
		t.Fatalf("cannot start the control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.Keep()
			t.Logf("logs of the control plane: %s", c.LogDir)
		}
		c.Stop()
	})
	e := &kube.Env{Config: c.Config, Client: c.Client, Scheme: c.Client.Scheme()}
	k := newRecorder[params, obs]()
	startProviders(t, e, k, nil)
	ns := e.Namespace(t, "team")
	kc, pc, mg := kubeconfigSecret(ns), providerConfig(ns), kubernetesProxy(ns, "web")
	createAll(t, e.Client, kc, pc, mg)
	kube.Eventually(t, "Ready=True", func() (bool, string) {
		c, err := condition(e.Client, client.ObjectKeyFromObject(mg), xpv2.TypeReady)
		return err == nil && c.Status == corev1.ConditionTrue, fmt.Sprint(c, err)
	})

	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := e.Client.Delete(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	kube.Eventually(t, "the namespace to be gone", func() (bool, string) {
		ok, msg := gone(e.Client, n)
		return ok, fmt.Sprint(msg, n.Status.Conditions)
	})
	w := k.writes(ns)
	if len(w) < 2 || w[len(w)-1].op != "delete" || w[len(w)-1].secret != "team-kubeconfig" {
		t.Errorf("the instance must be deleted with the config's credentials, calls %+v", w)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.instances) != 0 {
		t.Errorf("instances left: %v", k.instances)
	}
}
