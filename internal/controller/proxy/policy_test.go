/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/controller/kubernetesproxy"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// clusterConfig is a ClusterProviderConfig of the platform, its kubeconfig
// in the platform's namespace.
func clusterConfig(name, platformNS string, p v1alpha1.Policy) *v1alpha1.ClusterProviderConfig {
	return &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ProviderConfigSpec{
			Credentials: v1alpha1.Credentials{
				Source: v1alpha1.CredentialsSourceSecret,
				SecretRef: &commonv1alpha1.SecretKeySelector{
					SecretReference: commonv1alpha1.SecretReference{Namespace: platformNS, Name: "kubeconfig"}, Key: "kubeconfig",
				},
			},
			Policy: p,
		},
	}
}

// onCluster is a KubernetesProxy of a team using ClusterProviderConfig cpc.
func onCluster(ns, name, cpc string) *v1alpha1.KubernetesProxy {
	mg := kubernetesProxy(ns, name)
	mg.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: cpc}
	return mg
}

func synced(c client.Client, mg *v1alpha1.KubernetesProxy) (xpv2.Condition, error) {
	return condition(c, client.ObjectKeyFromObject(mg), xpv2.TypeSynced)
}

// TestPolicyRefusesDirectResources: a team that writes a managed resource
// itself, on the platform's ClusterProviderConfig, skips the composition
// function's guardrails; the provider applies the config's policy (and its
// safe defaults when it has none) before it creates anything, and says
// which field breaks which rule on the resource's Synced condition.
func TestPolicyRefusesDirectResources(t *testing.T) {
	e := kube.Shared(t)
	platform := e.Namespace(t, "platform")
	team := e.Namespace(t, "policy")
	k := newRecorder[params, obs]()
	startProviders(t, e, k, nil)

	open := "policy-open-" + team
	selective := "policy-selective-" + team
	createAll(t, e.Client, kubeconfigSecret(platform),
		clusterConfig(open, platform, v1alpha1.Policy{}),
		clusterConfig(selective, platform, v1alpha1.Policy{ProxyPolicy: commonv1alpha1.ProxyPolicy{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"egressproxy.io/lab": "true"}},
		}}))

	private := onCluster(team, "private", open)
	private.Spec.ForProvider.DenyPrivateDestinations = ptr.To(false)
	private.Spec.ForProvider.AllowedDestinations = []string{"10.0.0.0/8"}
	unselected := onCluster(team, "unselected", selective)
	within := onCluster(team, "within", open)
	within.Spec.ForProvider.AllowedDestinations = []string{"api.example.com"}
	createAll(t, e.Client, private, unselected, within)
	cleanUp(t, e, private, unselected, within)

	cases := map[string]struct {
		reason string
		mg     *v1alpha1.KubernetesProxy
		want   []string
	}{
		"PrivateDestinations": {
			reason: "A config without a policy does not let a resource turn denyPrivateDestinations off and reach a private range.",
			mg:     private,
			want: []string{
				fmt.Sprintf(`spec.forProvider.denyPrivateDestinations false is not allowed: ClusterProviderConfig %q spec.policy.allowedPrivateDestinations lists no private range the proxy may reach`, open),
				fmt.Sprintf(`spec.forProvider.allowedDestinations[0] "10.0.0.0/8" is a private range not in ClusterProviderConfig %q spec.policy.allowedPrivateDestinations`, open),
			},
		},
		"NamespaceNotSelected": {
			reason: "A config whose namespaceSelector does not select the resource's namespace refuses it.",
			mg:     unselected,
			want:   []string{fmt.Sprintf(`namespace %q is not selected by ClusterProviderConfig %q spec.policy.namespaceSelector`, team, selective)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube.Eventually(t, "Synced=False naming the field and the rule", func() (bool, string) {
				c, err := synced(e.Client, tc.mg)
				ok := err == nil && c.Status == corev1.ConditionFalse && c.Reason == xpv2.ReasonReconcileError
				for _, w := range tc.want {
					ok = ok && strings.Contains(c.Message, w)
				}
				return ok, fmt.Sprint(c, err)
			})
		})
	}

	kube.Eventually(t, "the resource within the policy to be Ready", func() (bool, string) {
		c, err := condition(e.Client, client.ObjectKeyFromObject(within), xpv2.TypeReady)
		return err == nil && c.Status == corev1.ConditionTrue, fmt.Sprint(c, err)
	})
	if w := k.writes(team); len(w) == 0 || w[0].op != "create" {
		t.Errorf("the resource within the policy must be created, calls %+v", w)
	}
	if got := instances(k, team); len(got) != 1 {
		t.Errorf("the backend must see only the resource within the policy, saw instances %v", got)
	}

	// Labelling the namespace lets it use the selective config.
	ns := &corev1.Namespace{}
	if err := e.Client.Get(t.Context(), client.ObjectKey{Name: team}, ns); err != nil {
		t.Fatal(err)
	}
	ns.SetLabels(map[string]string{"egressproxy.io/lab": "true"})
	if err := e.Client.Update(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	kube.Eventually(t, "the selected namespace's resource to be Ready", func() (bool, string) {
		c, err := condition(e.Client, client.ObjectKeyFromObject(unselected), xpv2.TypeReady)
		return err == nil && c.Status == corev1.ConditionTrue, fmt.Sprint(c, err)
	})
}

// TestPolicyNamespacesForbidden: a provider without the namespaces
// ClusterRole, or with only get of it, cannot evaluate a namespaceSelector.
// The resource's Synced condition names the missing permission and the role
// that grants it at the first reconcile, rather than reporting an informer
// that can never sync when the reconcile times out.
func TestPolicyNamespacesForbidden(t *testing.T) {
	cases := map[string]struct {
		reason string
		rules  []rbacv1.PolicyRule
		verb   string
	}{
		"None": {
			reason: "Without the role the direct get is refused.",
			verb:   "get",
		},
		"GetOnly": {
			reason: "With get alone the cache's list would be refused, and its informer would never sync.",
			rules:  []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}}},
			verb:   "list",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Log(tc.reason)
			testNamespacesForbidden(t, strings.ToLower(name), tc.rules, tc.verb)
		})
	}
}

func testNamespacesForbidden(t *testing.T, suffix string, extra []rbacv1.PolicyRule, verb string) {
	e := kube.Shared(t)
	platform := e.Namespace(t, "platform")
	team := e.Namespace(t, "nsforbidden-"+suffix)
	user := "provider-without-namespaces-" + team
	// Everything the provider uses in this test but namespaces.
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: append([]rbacv1.PolicyRule{
			{APIGroups: []string{v1alpha1.Group}, Resources: []string{"*"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"secrets", "events", "configmaps"}, Verbs: []string{"*"}},
			{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"*"}},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
		}, extra...),
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	createAll(t, e.Client, role, binding)
	t.Cleanup(func() {
		_ = e.Client.Delete(context.Background(), binding)
		_ = e.Client.Delete(context.Background(), role)
	})
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	k := newRecorder[params, obs]()
	e.RunManagerAs(t, cfg, func(mgr ctrl.Manager, o controller.Options) error {
		po := proxy.Options{Options: o, ProviderInstance: "test", CredentialsKey: []byte("a test key of thirty-two bytes..")}
		return kubernetesproxy.Controller.Setup(mgr, po, kubernetesFactory(k))
	})

	name := "policy-nsforbidden-" + team
	mg := onCluster(team, "web", name)
	createAll(t, e.Client, kubeconfigSecret(platform),
		clusterConfig(name, platform, v1alpha1.Policy{ProxyPolicy: commonv1alpha1.ProxyPolicy{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"egressproxy.io/lab": "true"}},
		}}), mg)
	cleanUp(t, e, mg)
	start := time.Now()
	want := fmt.Sprintf(`cannot evaluate ClusterProviderConfig %q spec.policy.namespaceSelector: the provider's ServiceAccount may not %s namespaces; `+
		`it needs get, list and watch on namespaces: bind the ClusterRole provider-egressproxy:namespaces`, name, verb)
	kube.Eventually(t, "Synced=False naming the permission", func() (bool, string) {
		c, err := synced(e.Client, mg)
		return err == nil && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, want), fmt.Sprint(c, err)
	})
	t.Logf("the condition named the permission %s after the resource was created", time.Since(start).Round(time.Millisecond))
	if got := calls(k, team); got != 0 {
		t.Errorf("a resource whose namespace cannot be checked must not reach the backend: %d calls", got)
	}
}

// TestPolicyTightened: a policy changed to refuse a resource that already
// runs surfaces on the resource, changes nothing on the backend, and still
// lets the resource be deleted with its instance.
func TestPolicyTightened(t *testing.T) {
	e := kube.Shared(t)
	platform := e.Namespace(t, "platform")
	team := e.Namespace(t, "tightened")
	k := newRecorder[params, obs]()
	startProviders(t, e, k, nil)

	name := "policy-tightened-" + team
	cpc := clusterConfig(name, platform, v1alpha1.Policy{})
	mg := onCluster(team, "web", name)
	mg.Spec.ForProvider.AllowedConnectPorts = []int32{443, 22}
	createAll(t, e.Client, kubeconfigSecret(platform), cpc, mg)
	cleanUp(t, e, mg)
	kube.Eventually(t, "Ready", func() (bool, string) {
		c, err := condition(e.Client, client.ObjectKeyFromObject(mg), xpv2.TypeReady)
		return err == nil && c.Status == corev1.ConditionTrue, fmt.Sprint(c, err)
	})

	if err := e.Client.Get(t.Context(), client.ObjectKeyFromObject(cpc), cpc); err != nil {
		t.Fatal(err)
	}
	cpc.Spec.Policy.AllowedConnectPorts = []int32{443}
	if err := e.Client.Update(t.Context(), cpc); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`spec.forProvider.allowedConnectPorts[1] 22 is not in ClusterProviderConfig %q spec.policy.allowedConnectPorts [443]`, name)
	kube.Eventually(t, "Synced=False naming the field and the rule", func() (bool, string) {
		c, err := synced(e.Client, mg)
		return err == nil && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, want), fmt.Sprint(c, err)
	})
	before := calls(k, team)

	// A change of the refused resource is not applied either: the backend
	// is not even asked.
	if err := e.Client.Get(t.Context(), client.ObjectKeyFromObject(mg), mg); err != nil {
		t.Fatal(err)
	}
	mg.Spec.ForProvider.AllowedDestinations = []string{"api.example.com"}
	if err := e.Client.Update(t.Context(), mg); err != nil {
		t.Fatal(err)
	}
	// The change triggers a reconcile at once, and the poll one a second.
	time.Sleep(3 * time.Second)
	if got := calls(k, team); got != before {
		t.Errorf("a refused resource must not reach the backend: %d calls, then %d", before, got)
	}

	if err := e.Client.Delete(t.Context(), mg); err != nil {
		t.Fatal(err)
	}
	kube.Eventually(t, "the refused resource to be gone", func() (bool, string) { return gone(e.Client, mg) })
	if w := k.writes(team); len(w) == 0 || w[len(w)-1].op != "delete" {
		t.Errorf("the instance of a refused resource must still be deleted, calls %+v", w)
	}
}

// instances returns the instances of namespace ns the backend saw any call for.
func instances(r *recorder[params, obs], ns string) map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := map[string]bool{}
	for _, c := range r.calls {
		if c.namespace == ns {
			names[c.name] = true
		}
	}
	return names
}

// calls counts the backend calls for resources of namespace ns.
func calls(r *recorder[params, obs], ns string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		if c.namespace == ns {
			n++
		}
	}
	return n
}

// cleanUp deletes the resources when the test ends, while its manager still
// runs, and waits until they are gone: the managers of later tests see
// every namespace of the shared API server.
func cleanUp(t *testing.T, e *kube.Env, mgs ...client.Object) {
	t.Helper()
	t.Cleanup(func() {
		for _, mg := range mgs {
			if err := e.Client.Delete(context.Background(), mg); client.IgnoreNotFound(err) != nil {
				t.Error(err)
			}
		}
		for _, mg := range mgs {
			kube.Eventually(t, mg.GetName()+" to be gone", func() (bool, string) { return gone(e.Client, mg) })
		}
	})
}
