/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy

import (
	"context"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kubernetes/kubernetesdesc"
)

// TestConnectAppliesPolicy: Connect refuses a resource that breaks its
// provider config's policy before it builds a backend, so nothing reaches
// the backend; a resource being deleted is not refused.
func TestConnectAppliesPolicy(t *testing.T) {
	lab := func(p commonv1alpha1.ProxyPolicy) *v1alpha1.ClusterProviderConfig {
		return &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "lab"}, Spec: v1alpha1.ProviderConfigSpec{Policy: v1alpha1.Policy{ProxyPolicy: p}}}
	}
	onLab := func(o ...mgOption) *v1alpha1.KubernetesProxy {
		mg := extMR(o...)
		mg.SetProviderConfigReference(&xpv2.ProviderConfigReference{Kind: KindClusterProviderConfig, Name: "lab"})
		return mg
	}
	private := func(mg *v1alpha1.KubernetesProxy) {
		mg.Spec.ForProvider.DenyPrivateDestinations = ptr.To(false)
		mg.Spec.ForProvider.AllowedDestinations = []string{"10.0.0.0/8"}
	}
	selective := commonv1alpha1.ProxyPolicy{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"egressproxy.io/lab": "true"}}}
	// get answers with the config and the namespace "team", labelled.
	get := func(cpc client.Object, nsLabels map[string]string) test.MockGetFn {
		return func(_ context.Context, key client.ObjectKey, o client.Object) error {
			switch o := o.(type) {
			case *v1alpha1.ClusterProviderConfig:
				cpc.DeepCopyObject().(*v1alpha1.ClusterProviderConfig).DeepCopyInto(o) //nolint:forcetypeassert // Always one.
			case *corev1.Namespace:
				o.SetName(key.Name)
				o.SetLabels(nsLabels)
			default:
				return errors.Errorf("unexpected Get of %T", o)
			}
			return nil
		}
	}

	type args struct {
		get test.MockGetFn
		mg  *v1alpha1.KubernetesProxy
	}
	type want struct {
		err   error
		built bool
		// private are the policy's private ranges the backend is given
		// with what the proxy allows, for squid to enforce.
		private []string
	}

	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"PrivateWithoutPolicy": {
			reason: "A config without a policy refuses denyPrivateDestinations false and a private destination, before any backend is built.",
			args:   args{get: get(lab(commonv1alpha1.ProxyPolicy{}), nil), mg: onLab(private)},
			want: want{err: backend.Permanent(errors.Wrap(errors.New(
				`spec.forProvider.denyPrivateDestinations false is not allowed: ClusterProviderConfig "lab" spec.policy.allowedPrivateDestinations lists no private range the proxy may reach; `+
					`spec.forProvider.allowedDestinations[0] "10.0.0.0/8" is a private range not in ClusterProviderConfig "lab" spec.policy.allowedPrivateDestinations`), errPolicyRefuses))},
		},
		"PrivateWithinPolicy": {
			reason: "A private destination the policy allows connects, and the backend is told the policy's private ranges.",
			args: args{
				get: get(lab(commonv1alpha1.ProxyPolicy{ProxyRules: commonv1alpha1.ProxyRules{AllowedPrivateDestinations: []string{"10.0.0.0/8"}}}), nil),
				mg:  onLab(private),
			},
			want: want{built: true, private: []string{"10.0.0.0/8"}},
		},
		"NamespaceNotSelected": {
			reason: "A namespace the config's selector does not select is refused.",
			args:   args{get: get(lab(selective), map[string]string{"egressproxy.io/lab": "false"}), mg: onLab()},
			want: want{err: backend.Permanent(errors.Wrap(errors.New(
				`namespace "team" is not selected by ClusterProviderConfig "lab" spec.policy.namespaceSelector`), errPolicyRefuses))},
		},
		"NamespaceSelected": {
			reason: "A namespace the config's selector selects connects.",
			args:   args{get: get(lab(selective), map[string]string{"egressproxy.io/lab": "true"}), mg: onLab()},
			want:   want{built: true},
		},
		"DeletedConnects": {
			reason: "A resource being deleted connects whatever the policy says, so that its instance can go.",
			args:   args{get: get(lab(selective), nil), mg: onLab(private, withDeletion())},
			want:   want{built: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			built := false
			c := NewConnector(ConnectorConfig[*v1alpha1.KubernetesProxy, kparams, kobs]{
				Kube:    &test.MockClient{MockGet: tc.args.get},
				Kind:    testKind{},
				Backend: "kubernetes",
				Policy:  kubernetesdesc.Backend.Policy,
				NewConfigs: func() (client.Object, client.Object) {
					return &v1alpha1.ProviderConfig{}, &v1alpha1.ClusterProviderConfig{}
				},
				NewBackend: func(context.Context, client.Client, Config) (backend.Backend[kparams, kobs], error) {
					built = true
					return backend.Fns[kparams, kobs]{}, nil
				},
			}, Options{})
			ext, err := c.Connect(t.Context(), tc.args.mg)
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\nConnect(...): -want err, +got err:\n%s", tc.reason, diff)
			}
			if err == nil {
				e := ext.(*traced[*v1alpha1.KubernetesProxy]).TypedExternalClient.(*External[*v1alpha1.KubernetesProxy, kparams, kobs]) //nolint:forcetypeassert // What Connect returns.
				if diff := cmp.Diff(tc.want.private, e.desired(tc.args.mg, backend.Credentials{}).AllowedPrivateDestinations); diff != "" {
					t.Errorf("%s\nConnect(...): Desired.AllowedPrivateDestinations: -want, +got:\n%s", tc.reason, diff)
				}
			}
			if built != tc.want.built {
				t.Errorf("%s\nConnect(...): backend built %t, want %t", tc.reason, built, tc.want.built)
			}
		})
	}
}
