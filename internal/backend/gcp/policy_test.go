/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/gcp/gcpdesc"
)

// errFmtSANotAllowed is package policy's message for a service account the
// config does not allow.
const errFmtSANotAllowed = "spec.forProvider.serviceAccountEmail %s is not in spec.allowedServiceAccounts or spec.policy.gcp.serviceAccounts of %s: a proxy may run only as a service account its provider config allows, since whoever controls the proxy can obtain that account's tokens"

func TestCheckPolicy(t *testing.T) {
	const config = `ClusterProviderConfig lab`
	refused := func(format string, args ...any) error { return backend.Permanent(errors.Errorf(format, args...)) }
	cases := map[string]struct {
		reason string
		policy v1alpha1.GCPPolicy
		mod    func(*Desired)
		want   error
	}{
		"Defaults": {
			reason: "Without a policy the defaults go: the default image, machine type and network, no tags, no subnetwork.",
		},
		"DefaultImageOnly": {
			reason: "Without spec.policy.gcp.images only the provider's default image boots.",
			mod:    func(d *Desired) { d.Params.Image = "projects/evil/global/images/x" },
			want:   refused(`spec.forProvider.image "projects/evil/global/images/x" is not in ClusterProviderConfig lab spec.policy.gcp.images, which is empty and allows only "` + DefaultImage + `"`),
		},
		"ImagePrefix": {
			reason: "An entry ending in / allows every image under it.",
			policy: v1alpha1.GCPPolicy{Images: []string{"projects/debian-cloud/global/images/family/"}},
			mod:    func(d *Desired) { d.Params.Image = "projects/debian-cloud/global/images/family/debian-13" },
		},
		"ImagePrefixOtherProject": {
			reason: "A prefix does not reach another project.",
			policy: v1alpha1.GCPPolicy{Images: []string{"projects/debian-cloud/global/images/family/"}},
			mod:    func(d *Desired) { d.Params.Image = "projects/debian-cloud-evil/global/images/family/debian-13" },
			want:   refused(`spec.forProvider.image "projects/debian-cloud-evil/global/images/family/debian-13" is not in ClusterProviderConfig lab spec.policy.gcp.images, which allows "projects/debian-cloud/global/images/family/"`),
		},
		"ImageExactIsNoPrefix": {
			reason: "An entry without a trailing / allows that image only.",
			policy: v1alpha1.GCPPolicy{Images: []string{"projects/debian-cloud/global/images/family/debian-12"}},
			mod:    func(d *Desired) { d.Params.Image = "projects/debian-cloud/global/images/family/debian-12-arm64" },
			want:   refused(`spec.forProvider.image "projects/debian-cloud/global/images/family/debian-12-arm64" is not in ClusterProviderConfig lab spec.policy.gcp.images, which allows "projects/debian-cloud/global/images/family/debian-12"`),
		},
		"MachineTypeNotDefault": {
			reason: "Without spec.policy.gcp.machineTypes only the small default ones go.",
			mod:    func(d *Desired) { d.Params.MachineType = "n2-highmem-128" },
			want:   refused(`spec.forProvider.machineType "n2-highmem-128" is not in ClusterProviderConfig lab spec.policy.gcp.machineTypes, which is empty and allows only "e2-micro", "e2-small", "e2-medium", "e2-standard-2"`),
		},
		"MachineTypeListed": {
			reason: "A listed machine type goes, and the list replaces the defaults.",
			policy: v1alpha1.GCPPolicy{MachineTypes: []string{"n2-standard-2"}},
			mod:    func(d *Desired) { d.Params.MachineType = "n2-standard-2" },
		},
		"MachineTypeListReplacesDefaults": {
			reason: "A list replaces the defaults: e2-small (the API's default) is then refused.",
			policy: v1alpha1.GCPPolicy{MachineTypes: []string{"n2-standard-2"}},
			want:   refused(`spec.forProvider.machineType "e2-small" is not in ClusterProviderConfig lab spec.policy.gcp.machineTypes, which allows "n2-standard-2"`),
		},
		"NetworkNotDefault": {
			reason: "Without spec.policy.gcp.networks only the default network goes.",
			mod:    func(d *Desired) { d.Params.Network = "prod-vpc" },
			want:   refused(`spec.forProvider.network "prod-vpc" is not in ClusterProviderConfig lab spec.policy.gcp.networks, which is empty and allows only "default"`),
		},
		"SubnetworkNone": {
			reason: "Without spec.policy.gcp.subnetworks no subnetwork may be named.",
			mod:    func(d *Desired) { d.Params.Subnetwork = proto.String("db") },
			want:   refused(`spec.forProvider.subnetwork "db" is not in ClusterProviderConfig lab spec.policy.gcp.subnetworks, which is empty and allows none`),
		},
		"SubnetworkListed": {
			reason: "A listed subnetwork of a listed network goes.",
			policy: v1alpha1.GCPPolicy{Networks: []string{"vpc"}, Subnetworks: []string{"egress"}},
			mod:    func(d *Desired) { d.Params.Network, d.Params.Subnetwork = "vpc", proto.String("egress") },
		},
		"TagNone": {
			reason: "Without spec.policy.gcp.networkTags no tag may be added: firewall rules select VMs by tag.",
			mod:    func(d *Desired) { d.Params.NetworkTags = []string{"allow-db"} },
			want:   refused(`spec.forProvider.networkTags "allow-db" is not in ClusterProviderConfig lab spec.policy.gcp.networkTags, which is empty and allows none`),
		},
		"TagsOneNotListed": {
			reason: "Every tag must be listed.",
			policy: v1alpha1.GCPPolicy{NetworkTags: []string{"egress-proxy"}},
			mod:    func(d *Desired) { d.Params.NetworkTags = []string{"egress-proxy", "allow-db"} },
			want:   refused(`spec.forProvider.networkTags "allow-db" is not in ClusterProviderConfig lab spec.policy.gcp.networkTags, which allows "egress-proxy"`),
		},
		"ServiceAccountFromPolicy": {
			reason: "spec.policy.gcp.serviceAccounts reach the backend as allowed accounts (the factory merges them).",
			policy: v1alpha1.GCPPolicy{ServiceAccounts: []string{"proxy@test-project.iam.gserviceaccount.com"}},
			mod: func(d *Desired) {
				d.Params.ServiceAccountEmail = proto.String("other@test-project.iam.gserviceaccount.com")
			},
			want: refused(errFmtSANotAllowed, "other@test-project.iam.gserviceaccount.com", config),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := newBackend(testProject, &services{}, WithPolicy(config, tc.policy), WithAllowedServiceAccounts(config, tc.policy.ServiceAccounts...))
			d := desired()
			if tc.mod != nil {
				tc.mod(&d)
			}
			s, err := resolve(d)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.checkPolicy(s, d), test.EquateErrors()); diff != "" {
				t.Errorf("%s\ncheckPolicy: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestPolicyEnforced drives the policy through the fake: a refused Create
// makes nothing, and a proxy the policy stops allowing shows as drift that
// Update refuses, keeping the VM.
func TestPolicyEnforced(t *testing.T) {
	e := newEnv(t)
	d := desired(func(d *Desired) { d.Params.Image = "projects/evil/global/images/x" })
	err := e.b.Create(ctx(t), d)
	if backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), `spec.forProvider.image "projects/evil/global/images/x" is not in`) {
		t.Fatalf("Create with an image the policy does not allow = %v (class %s), want Permanent naming the field", err, backend.ClassOf(err))
	}
	if n := len(e.fake.Instances()) + len(e.fake.Addresses()) + len(e.fake.Firewalls()); n != 0 {
		t.Fatalf("a refused Create must create nothing, %d resources exist", n)
	}

	d = desired(func(d *Desired) { d.Params.NetworkTags = []string{"egress-proxy"} })
	WithPolicy("ClusterProviderConfig lab", v1alpha1.GCPPolicy{NetworkTags: []string{"egress-proxy"}})(e.b)
	if err := e.b.Create(ctx(t), d); err != nil {
		t.Fatalf("Create with a listed tag: %v", err)
	}
	e.untilReady(t, d, 5)

	WithPolicy("ClusterProviderConfig lab", v1alpha1.GCPPolicy{})(e.b)
	const why = `spec.forProvider.networkTags "egress-proxy" is not in ClusterProviderConfig lab spec.policy.gcp.networkTags`
	// The connector refuses the resource before any backend call; Observe,
	// which a resource being deleted still needs, reports the VM as it is.
	o, err := e.b.Observe(ctx(t), d)
	if err != nil || strings.Contains(o.Diff, why) {
		t.Errorf("Observe once the policy no longer allows the tag = %+v, %v; want it found, the policy left to the connector", o, err)
	}
	if err := e.b.Update(ctx(t), d); backend.ClassOf(err) != backend.ClassPermanent || !strings.Contains(err.Error(), why) {
		t.Errorf("Update once the policy no longer allows the tag = %v, want Permanent saying why", err)
	}
	if len(e.fake.Instances()) != 1 {
		t.Errorf("a refused Update must keep the VM")
	}
	e.deleteAll(t, d, 8)
}

// TestDefaultPolicyAllowsComposed checks that what the compositions make
// of each size, with the function's built-in defaults, passes a config
// without a policy.
func TestDefaultPolicyAllowsComposed(t *testing.T) {
	b := newBackend(testProject, &services{})
	for _, size := range []string{backend.SizeSmall, backend.SizeMedium, backend.SizeLarge} {
		d := desired(func(d *Desired) { d.Params.MachineType = gcpdesc.MachineTypeFor(size, nil) })
		s, err := resolve(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.checkPolicy(s, d); err != nil {
			t.Errorf("size %s: %v", size, err)
		}
	}
}
