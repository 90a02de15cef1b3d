/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/egressproxy/provider-egressproxy/internal/backend/gcp/gcpdesc"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kubernetes/kubernetesdesc"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/kvmdesc"
	"github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
)

func TestSizes(t *testing.T) {
	type want struct {
		size        string
		warnings    []string
		replicas    int32
		machineType string
		kvm         kvmdesc.KVMSize
	}
	in := v1alpha1.Input{
		Kubernetes: &kubernetesdesc.Defaults{Replicas: &kubernetesdesc.ReplicasPerSize{Large: ptr.To[int32](6)}},
		GCP:        &gcpdesc.Defaults{MachineTypes: &gcpdesc.MachineTypesPerSize{Medium: "n2-standard-2"}},
		KVM:        &kvmdesc.Defaults{Sizes: &kvmdesc.Sizes{Small: &kvmdesc.KVMSize{VCPUs: 1, MemoryMiB: 256}}},
	}

	cases := map[string]struct {
		reason string
		size   string
		want   want
	}{
		"Empty": {
			reason: "An XR without a size (rendered without the XRD's default) is small.",
			size:   "",
			want:   want{size: "small", replicas: 1, machineType: "e2-small", kvm: kvmdesc.KVMSize{VCPUs: 1, MemoryMiB: 256}},
		},
		"Medium": {
			reason: "Medium takes the input's machine type and the built-in replicas and VM size.",
			size:   "medium",
			want:   want{size: "medium", replicas: 2, machineType: "n2-standard-2", kvm: kvmdesc.KVMSize{VCPUs: 2, MemoryMiB: 1024}},
		},
		"Large": {
			reason: "Large takes the input's replicas and the built-in machine type and VM size.",
			size:   "large",
			want:   want{size: "large", replicas: 6, machineType: "e2-standard-2", kvm: kvmdesc.KVMSize{VCPUs: 4, MemoryMiB: 2048}},
		},
		"Unknown": {
			reason: "An unknown size is composed small, with a warning.",
			size:   "huge",
			want: want{size: "small", replicas: 1, machineType: "e2-small", kvm: kvmdesc.KVMSize{VCPUs: 1, MemoryMiB: 256},
				warnings: []string{`unknown spec.size "huge": composing a small proxy (sizes are small, medium and large)`}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := want{}
			got.size, got.warnings = sizeOf(tc.size)
			got.replicas = kubernetesdesc.ReplicasFor(got.size, in.Kubernetes.Replicas)
			got.machineType = gcpdesc.MachineTypeFor(got.size, in.GCP.MachineTypes)
			got.kvm = kvmdesc.SizeFor(got.size, in.KVM.Sizes)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nsizes of %q: -want, +got:\n%s", tc.reason, tc.size, diff)
			}
		})
	}
}
