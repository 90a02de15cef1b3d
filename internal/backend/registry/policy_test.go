/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package registry_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gcpv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	kubernetesv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	kvmv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
)

// TestEveryBackendHasAPolicy: the connector and the function refuse every
// resource of a backend without its own policy check.
func TestEveryBackendHasAPolicy(t *testing.T) {
	for _, b := range registry.Backends {
		if b.Policy == nil {
			t.Errorf("backend %s has no Policy", b.Name)
		}
	}
}

// TestBackendViolations: each backend's policy check (its description's
// Policy) finds its rules from the kind of the config, named as the
// provider names it, for parameters given as a value (the connector) or a
// pointer (the function); parameters of another backend are an error,
// never a policy that allows all.
func TestBackendViolations(t *testing.T) {
	team := metav1.ObjectMeta{Namespace: "team", Name: "own"}
	lab := metav1.ObjectMeta{Name: "lab"}
	type want struct {
		v   []string
		err bool
	}
	cases := map[string]struct {
		reason  string
		backend string
		cfg     any
		params  any
		want    want
	}{
		"KVMCluster": {
			reason:  "A KVMProxy's vCPUs above the default ceiling of a ClusterProviderConfig without a policy.",
			backend: "kvm",
			cfg:     &kvmv1alpha1.ClusterProviderConfig{ObjectMeta: lab},
			params:  kvmv1alpha1.KVMProxyParameters{BaseImageVolume: "b.qcow2", VCPUs: 8},
			want:    want{v: []string{`spec.forProvider.vcpus 8 is more than ClusterProviderConfig "lab" spec.policy.kvm.maxVCPUs (4, the default)`}},
		},
		"KVMNamespacedPointer": {
			reason:  "A team's ProviderConfig, parameters as a pointer.",
			backend: "kvm",
			cfg:     &kvmv1alpha1.ProviderConfig{ObjectMeta: team},
			params:  &kvmv1alpha1.KVMProxyParameters{BaseImageVolume: "b.qcow2", Pool: "vms"},
			want:    want{v: []string{`spec.forProvider.pool "vms" is not in ProviderConfig "own" spec.policy.kvm.pools (unset: only "default")`}},
		},
		"GCPEveryField": {
			reason:  "Every gcp field the policy refuses is named, the service account with the config's lists.",
			backend: "gcp",
			cfg: &gcpv1alpha1.ClusterProviderConfig{ObjectMeta: lab, Spec: gcpv1alpha1.ProviderConfigSpec{
				AllowedServiceAccounts: []string{"a@p.iam.gserviceaccount.com"},
			}},
			params: gcpv1alpha1.GCPProxyParameters{MachineType: "n2-standard-64", ServiceAccountEmail: ptr.To("b@p.iam.gserviceaccount.com")},
			want: want{v: []string{
				`spec.forProvider.machineType "n2-standard-64" is not in ClusterProviderConfig lab spec.policy.gcp.machineTypes, which is empty and allows only "e2-micro", "e2-small", "e2-medium", "e2-standard-2"`,
				`spec.forProvider.serviceAccountEmail b@p.iam.gserviceaccount.com is not in spec.allowedServiceAccounts or spec.policy.gcp.serviceAccounts of ClusterProviderConfig lab: a proxy may run only as a service account its provider config allows, since whoever controls the proxy can obtain that account's tokens`,
			}},
		},
		"GCPWithin": {
			reason:  "Defaults are within the defaults.",
			backend: "gcp",
			cfg:     &gcpv1alpha1.ProviderConfig{ObjectMeta: team},
			params:  gcpv1alpha1.GCPProxyParameters{Zone: "europe-west1-b"},
		},
		"KubernetesOwnNamespace": {
			reason:  "Without allowedNamespaces only the resource's own namespace name.",
			backend: "kubernetes",
			cfg:     &kubernetesv1alpha1.ProviderConfig{ObjectMeta: team},
			params:  kubernetesv1alpha1.KubernetesProxyParameters{Namespace: "egress"},
			want: want{v: []string{
				`spec.forProvider.namespace "egress" is not allowed by ProviderConfig team/own: its spec.allowedNamespaces is empty, which allows only "team", the managed resource's own namespace`,
			}},
		},
		"Mismatch": {
			reason:  "Parameters of another backend are an error.",
			backend: "kvm",
			cfg:     &kvmv1alpha1.ClusterProviderConfig{ObjectMeta: lab},
			params:  gcpv1alpha1.GCPProxyParameters{},
			want:    want{err: true},
		},
		"AnotherBackendsConfig": {
			reason:  "A backend given another backend's config is an error.",
			backend: "gcp",
			cfg:     &kvmv1alpha1.ClusterProviderConfig{ObjectMeta: lab},
			params:  gcpv1alpha1.GCPProxyParameters{},
			want:    want{err: true},
		},
		"UnknownConfig": {
			reason:  "A config of no known backend is an error.",
			backend: "kvm",
			cfg:     &metav1.PartialObjectMetadata{},
			params:  kvmv1alpha1.KVMProxyParameters{},
			want:    want{err: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, ok := registry.Backends.Lookup(tc.backend)
			if !ok {
				t.Fatalf("no backend %s", tc.backend)
			}
			v, err := b.Policy(tc.cfg, tc.params, "team")
			if diff := cmp.Diff(tc.want, want{v: v, err: err != nil}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nBackendViolations(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
