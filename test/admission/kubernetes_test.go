/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package admission

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

func kubernetesClusterConfig() obj {
	return config("kubernetes", "ClusterProviderConfig", obj{"credentials": obj{"source": "InjectedIdentity"}})
}

// TestKubernetesTenantSafety checks the admission half of the namespace and
// image allowlists: the cluster's own namespaces can be neither asked for nor
// allowed, and the lists hold only well-formed entries. The backend enforces
// the lists themselves (internal/backend/kubernetes/policy.go).
func TestKubernetesTenantSafety(t *testing.T) {
	e := kube.Shared(t)
	e.CreateNamespace(t, ns)

	const (
		an = "spec.allowedNamespaces"
		ai = "spec.allowedImages"
	)
	cases := map[string]struct {
		obj obj
		// field must appear in the error, and so must msg; an empty field
		// means the object must be accepted.
		field, msg string
	}{
		"KubeSystem":           {set(kubernetesProxy(), fp+"namespace", "kube-system"), fp + "namespace", "reserved for the cluster"},
		"KubePublic":           {set(kubernetesProxy(), fp+"namespace", "kube-public"), fp + "namespace", "reserved for the cluster"},
		"KubeNodeLease":        {set(kubernetesProxy(), fp+"namespace", "kube-node-lease"), fp + "namespace", "reserved for the cluster"},
		"AllowKubeSystem":      {set(kubernetesClusterConfig(), an, []any{"egress", "kube-system"}), an, "reserved for the cluster and never allowed"},
		"AllowKubePublicPC":    {set(kubernetesConfig(), an, []any{"kube-public"}), an, "reserved for the cluster and never allowed"},
		"AllowBadNamespace":    {set(kubernetesClusterConfig(), an, []any{"Egress_1"}), an, "should match"},
		"AllowGlobNamespace":   {set(kubernetesClusterConfig(), an, []any{"team-*"}), an, "should match"},
		"AllowDuplicateNS":     {set(kubernetesClusterConfig(), an, []any{"egress", "egress"}), an, "Duplicate"},
		"AllowImageWithSpace":  {set(kubernetesClusterConfig(), ai, []any{"squid:6 --x"}), ai, "should match"},
		"AllowEmptyImage":      {set(kubernetesConfig(), ai, []any{""}), ai, "at least 1"},
		"AllowedListsAccepted": {set(set(kubernetesClusterConfig(), an, []any{"egress", "*"}), ai, []any{"registry.example.com/", "docker.io/ubuntu/squid:"}), "", ""},
		"ProxyAccepted":        {set(kubernetesProxy(), fp+"image", "registry.example.com/squid@sha256:0123"), "", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: tc.obj}
			u.SetName("k8s-" + strings.ToLower(name) + "-" + fmt.Sprint(len(name)))
			err := e.Client.Create(t.Context(), u, client.FieldValidation("Strict"), client.DryRunAll)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("%s was rejected; want it accepted: %v", name, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s was accepted; want it rejected naming %q", name, tc.field)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.field) || !strings.Contains(msg, tc.msg) {
				t.Errorf("%s: error does not name %q with %q:\n%s", name, tc.field, tc.msg, msg)
			}
		})
	}
}
