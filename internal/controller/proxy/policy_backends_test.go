/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package proxy_test

import (
	"context"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gcpv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	kubernetesv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	kvmv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/controller/gcpproxy"
	"github.com/egressproxy/provider-egressproxy/internal/controller/kubernetesproxy"
	"github.com/egressproxy/provider-egressproxy/internal/controller/kvmproxy"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
)

// backendPolicyCase is one backend's managed resource that breaks a rule
// of its config's spec.policy.<backend>, and one within it.
type backendPolicyCase struct {
	// cpc is the ClusterProviderConfig "lab" with the rule.
	cpc client.Object
	// refused breaks the rule; within does not.
	refused, within resource.ModernManaged
	// want is the message naming the field and the rule.
	want string
}

// outcome is what Connect did with a resource: the error it returned and
// which backend calls the managed reconciler could then make.
type outcome struct {
	Err   string
	Class backend.Class
	// Built: Connect built a backend, so Observe, Create, Update or
	// Delete could follow.
	Built bool
}

// connectOutcome connects mg with the controller of its backend, its
// config cpc served by the client.
func connectOutcome[M resource.ModernManaged, P, O any](t *testing.T, c proxy.Controller[M, P, O], newCfgs func() (client.Object, client.Object), cpc client.Object, mg M) outcome {
	t.Helper()
	built := false
	conn := proxy.NewConnector(proxy.ConnectorConfig[M, P, O]{
		Kube: &test.MockClient{MockGet: func(_ context.Context, _ client.ObjectKey, o client.Object) error {
			// The only Get is the config's.
			return runtimeCopy(cpc, o)
		}},
		Kind:       c.Kind,
		Backend:    c.Backend.Name,
		Policy:     c.Backend.Policy,
		NewConfigs: newCfgs,
		NewBackend: func(context.Context, client.Client, proxy.Config) (backend.Backend[P, O], error) {
			built = true
			return backend.Fns[P, O]{}, nil
		},
	}, proxy.Options{})
	_, err := conn.Connect(t.Context(), mg)
	o := outcome{Built: built, Class: backend.ClassOf(err)}
	if err != nil {
		o.Err = err.Error()
	}
	return o
}

// runtimeCopy copies config from into to, both of one kind.
func runtimeCopy(from, to client.Object) error {
	switch f := from.(type) {
	case *kvmv1alpha1.ClusterProviderConfig:
		f.DeepCopyInto(to.(*kvmv1alpha1.ClusterProviderConfig)) //nolint:forcetypeassert // One kind per case.
	case *gcpv1alpha1.ClusterProviderConfig:
		f.DeepCopyInto(to.(*gcpv1alpha1.ClusterProviderConfig)) //nolint:forcetypeassert // One kind per case.
	case *kubernetesv1alpha1.ClusterProviderConfig:
		f.DeepCopyInto(to.(*kubernetesv1alpha1.ClusterProviderConfig)) //nolint:forcetypeassert // One kind per case.
	default:
		return errors.Errorf("unexpected Get of %T", to)
	}
	return nil
}

func onLab(mg resource.ModernManaged, deleted bool) {
	mg.SetNamespace("team")
	mg.SetName("web")
	mg.SetProviderConfigReference(&xpv2.ProviderConfigReference{Kind: proxy.KindClusterProviderConfig, Name: "lab"})
	if deleted {
		mg.SetDeletionTimestamp(&metav1.Time{Time: time.Unix(1, 0)})
	}
}

// TestBackendPolicyOneShape: every backend's own rules (spec.policy.kvm,
// .gcp and .kubernetes) are applied as the common ones are, in one place,
// the connector, before any backend call: a resource that breaks one gets
// a Permanent error naming the field and the rule (Synced), and no backend,
// so nothing is observed, created, updated or deleted because of the
// policy; a resource being deleted still connects, so its instance can go.
// The outcome is the same for all three backends.
func TestBackendPolicyOneShape(t *testing.T) {
	const refusedPrefix = "refused by the policy of the provider config: "
	lab := metav1.ObjectMeta{Name: "lab"}

	kvm := func(bridge string, deleted bool) *kvmv1alpha1.KVMProxy {
		mg := &kvmv1alpha1.KVMProxy{}
		onLab(mg, deleted)
		mg.Spec.ForProvider = kvmv1alpha1.KVMProxyParameters{BaseImageVolume: "debian-12.qcow2", Network: &kvmv1alpha1.KVMNetwork{Bridge: ptr.To(bridge)}}
		return mg
	}
	kvmLab := &kvmv1alpha1.ClusterProviderConfig{ObjectMeta: lab, Spec: kvmv1alpha1.ProviderConfigSpec{Policy: kvmv1alpha1.Policy{KVM: &kvmv1alpha1.KVMPolicy{Bridges: []string{"br-proxies"}}}}}

	gcp := func(image string, deleted bool) *gcpv1alpha1.GCPProxy {
		mg := &gcpv1alpha1.GCPProxy{}
		onLab(mg, deleted)
		mg.Spec.ForProvider = gcpv1alpha1.GCPProxyParameters{Zone: "europe-west1-b", Image: image}
		return mg
	}
	gcpLab := &gcpv1alpha1.ClusterProviderConfig{ObjectMeta: lab, Spec: gcpv1alpha1.ProviderConfigSpec{Policy: gcpv1alpha1.Policy{GCP: &gcpv1alpha1.GCPPolicy{Images: []string{"projects/debian-cloud/global/images/family/"}}}}}

	kube := func(st string, deleted bool) *kubernetesv1alpha1.KubernetesProxy {
		mg := &kubernetesv1alpha1.KubernetesProxy{}
		onLab(mg, deleted)
		mg.Spec.ForProvider = kubernetesv1alpha1.KubernetesProxyParameters{Namespace: "team", ServiceType: ptr.To(corev1.ServiceType(st))}
		return mg
	}
	kubeLab := &kubernetesv1alpha1.ClusterProviderConfig{ObjectMeta: lab}

	cases := map[string]struct {
		reason string
		run    func(t *testing.T, refused, deleted bool) outcome
		want   string
	}{
		"KVMBridge": {
			reason: "A KVMProxy on a bridge spec.policy.kvm.bridges does not list.",
			run: func(t *testing.T, refused, deleted bool) outcome {
				br := "br-proxies"
				if refused {
					br = "br-mgmt"
				}
				return connectOutcome(t, kvmproxy.Controller, func() (client.Object, client.Object) {
					return &kvmv1alpha1.ProviderConfig{}, &kvmv1alpha1.ClusterProviderConfig{}
				}, kvmLab, kvm(br, deleted))
			},
			want: `spec.forProvider.network.bridge "br-mgmt" is not in ClusterProviderConfig "lab" spec.policy.kvm.bridges`,
		},
		"GCPImage": {
			reason: "A GCPProxy booting an image spec.policy.gcp.images does not allow.",
			run: func(t *testing.T, refused, deleted bool) outcome {
				im := "projects/debian-cloud/global/images/family/debian-12"
				if refused {
					im = "projects/evil/global/images/x"
				}
				return connectOutcome(t, gcpproxy.Controller, func() (client.Object, client.Object) {
					return &gcpv1alpha1.ProviderConfig{}, &gcpv1alpha1.ClusterProviderConfig{}
				}, gcpLab, gcp(im, deleted))
			},
			want: `spec.forProvider.image "projects/evil/global/images/x" is not in ClusterProviderConfig lab spec.policy.gcp.images, which allows "projects/debian-cloud/global/images/family/"`,
		},
		"KubernetesServiceType": {
			reason: "A KubernetesProxy asking for a Service type spec.policy.kubernetes.serviceTypes does not allow.",
			run: func(t *testing.T, refused, deleted bool) outcome {
				st := "ClusterIP"
				if refused {
					st = "LoadBalancer"
				}
				return connectOutcome(t, kubernetesproxy.Controller, func() (client.Object, client.Object) {
					return &kubernetesv1alpha1.ProviderConfig{}, &kubernetesv1alpha1.ClusterProviderConfig{}
				}, kubeLab, kube(st, deleted))
			},
			want: `spec.forProvider.serviceType "LoadBalancer" is not allowed by ClusterProviderConfig lab: its spec.policy.kubernetes.serviceTypes is empty, which allows only "ClusterIP"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := map[string]outcome{
				"Refused":        tc.run(t, true, false),
				"Within":         tc.run(t, false, false),
				"RefusedDeleted": tc.run(t, true, true),
			}
			want := map[string]outcome{
				"Refused":        {Err: refusedPrefix + tc.want, Class: backend.ClassPermanent},
				"Within":         {Built: true, Class: backend.ClassNone},
				"RefusedDeleted": {Built: true, Class: backend.ClassNone},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nConnect(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
