/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"io"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/apis/kvm/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/kvmdesc"
)

const (
	testUID       = "0b4f2d7e-1111-4c2a-9d7e-5a0c6f3e9b21"
	testInstance  = "provider-test"
	testBase      = "base.qcow2"
	testPool      = "default-pool"
	testNamespace = "team-a"
)

// testPolicy allows what the fixtures use, so that the tests of other
// rules need not mind it; policy_test.go tests the policy.
var testPolicy = Policy{Config: `ClusterProviderConfig "test"`, KVM: &v1alpha1.KVMPolicy{
	Pools:         []string{testPool, "nope", "no-such-pool"},
	Networks:      []string{"default", "nat0"},
	Bridges:       []string{"br0"},
	AllowUserData: true,
}}

// testBackend is newBackend with testPolicy.
func testBackend(svc service, closer io.Closer, opts ...Option) *Backend {
	return newBackend(svc, closer, append([]Option{WithPolicy(testPolicy)}, opts...)...)
}

type desiredModifier func(*Desired)

// desired is a fixture; modifiers change a fresh copy.
func desired(mods ...desiredModifier) Desired {
	owner := backend.Owner{UID: testUID, Namespace: testNamespace, Name: "proxy"}
	d := Desired{
		Name:      backend.Name(owner, kvmdesc.Backend.MaxNameLength),
		Ownership: backend.Ownership{Owner: owner, ProviderInstance: testInstance},
		Proxy: commonv1alpha1.ProxyParameters{
			Port:                3128,
			AllowedClientCIDRs:  []string{"10.0.0.0/8"},
			AllowedDestinations: []string{".example.com"},
			AllowedConnectPorts: []int32{443},
		},
		Credentials: backend.Credentials{Username: "egressproxy", Password: "s3cret-password"},
		Params: v1alpha1.KVMProxyParameters{
			Pool:            testPool,
			BaseImageVolume: testBase,
			DiskGiB:         2,
			MemoryMiB:       256,
			VCPUs:           1,
			Network:         &v1alpha1.KVMNetwork{Name: ptr.To("default")},
			DomainType:      "qemu",
		},
	}
	for _, m := range mods {
		m(&d)
	}
	return d
}

func withOwnerUID(uid string) desiredModifier {
	return func(d *Desired) {
		d.Ownership.Owner.UID = types.UID(uid)
		d.Name = backend.Name(d.Ownership.Owner, kvmdesc.Backend.MaxNameLength)
	}
}

func withMemory(mib int32) desiredModifier {
	return func(d *Desired) { d.Params.MemoryMiB = mib }
}

func withDestinations(dst ...string) desiredModifier {
	return func(d *Desired) { d.Proxy.AllowedDestinations = dst }
}

func withPassword(pw string) desiredModifier {
	return func(d *Desired) { d.Credentials.Password = pw }
}

func withProviderInstance(pi string) desiredModifier {
	return func(d *Desired) { d.Ownership.ProviderInstance = pi }
}

func withName(n string) desiredModifier {
	return func(d *Desired) { d.Name = n }
}

func withPool(p string) desiredModifier {
	return func(d *Desired) { d.Params.Pool = p }
}

func withBridge(br string) desiredModifier {
	return func(d *Desired) { d.Params.Network = &v1alpha1.KVMNetwork{Bridge: ptr.To(br)} }
}

// deleteOnly is what the garbage collector passes: name and ownership.
func deleteOnly(d Desired) Desired {
	return Desired{Name: d.Name, Ownership: d.Ownership}
}
