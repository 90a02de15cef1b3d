/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package function

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	gcp "github.com/egressproxy/provider-egressproxy/internal/backend/gcp/desc"
	kubernetes "github.com/egressproxy/provider-egressproxy/internal/backend/kubernetes/desc"
	kvm "github.com/egressproxy/provider-egressproxy/internal/backend/kvm/desc"
	"github.com/egressproxy/provider-egressproxy/internal/function/input/v1alpha1"
)

func TestSizes(t *testing.T) {
	type want struct {
		size        string
		warnings    []string
		replicas    int32
		machineType string
		kvm         v1alpha1.KVMSize
	}
	in := v1alpha1.Input{
		Kubernetes: &v1alpha1.KubernetesDefaults{Replicas: &v1alpha1.ReplicasPerSize{Large: ptr.To[int32](6)}},
		GCP:        &v1alpha1.GCPDefaults{MachineTypes: &v1alpha1.MachineTypesPerSize{Medium: "n2-standard-2"}},
		KVM:        &v1alpha1.KVMDefaults{Sizes: &v1alpha1.KVMSizes{Small: &v1alpha1.KVMSize{VCPUs: 1, MemoryMiB: 256}}},
	}

	cases := map[string]struct {
		reason string
		size   string
		want   want
	}{
		"Empty": {
			reason: "An XR without a size (rendered without the XRD's default) is small.",
			size:   "",
			want:   want{size: "small", replicas: 1, machineType: "e2-small", kvm: v1alpha1.KVMSize{VCPUs: 1, MemoryMiB: 256}},
		},
		"Medium": {
			reason: "Medium takes the input's machine type and the built-in replicas and VM size.",
			size:   "medium",
			want:   want{size: "medium", replicas: 2, machineType: "n2-standard-2", kvm: v1alpha1.KVMSize{VCPUs: 2, MemoryMiB: 1024}},
		},
		"Large": {
			reason: "Large takes the input's replicas and the built-in machine type and VM size.",
			size:   "large",
			want:   want{size: "large", replicas: 6, machineType: "e2-standard-2", kvm: v1alpha1.KVMSize{VCPUs: 4, MemoryMiB: 2048}},
		},
		"Unknown": {
			reason: "An unknown size is composed small, with a warning.",
			size:   "huge",
			want: want{size: "small", replicas: 1, machineType: "e2-small", kvm: v1alpha1.KVMSize{VCPUs: 1, MemoryMiB: 256},
				warnings: []string{`unknown spec.size "huge": composing a small proxy (sizes are small, medium and large)`}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := want{}
			got.size, got.warnings = sizeOf(tc.size)
			got.replicas = kubernetes.ReplicasFor(got.size, in.Kubernetes.Replicas)
			got.machineType = gcp.MachineTypeFor(got.size, in.GCP.MachineTypes)
			got.kvm = kvm.SizeFor(got.size, in.KVM.Sizes)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nsizes of %q: -want, +got:\n%s", tc.reason, tc.size, diff)
			}
		})
	}
}
