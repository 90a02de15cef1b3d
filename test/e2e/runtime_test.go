/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best dot-imported.
	corev1 "k8s.io/api/core/v1"
)

var _ = Describe("the provider's runtime (examples/runtime/provider-egressproxy.yaml)", Label("runtime"), func() {
	It("runs the provider with a read-only root file system, no capabilities, and a small memory /tmp as TMPDIR, its only writable place", func(ctx SpecContext) {
		pods, err := env.c.ProviderPods(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(pods).NotTo(BeEmpty())
		for _, p := range pods {
			ct := p.Spec.Containers[0]
			Expect(ct.SecurityContext).NotTo(BeNil(), "pod %s", p.Name)
			Expect(ct.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()), "pod %s", p.Name)
			Expect(ct.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()), "pod %s", p.Name)
			Expect(ct.SecurityContext.Capabilities).NotTo(BeNil(), "pod %s", p.Name)
			Expect(ct.SecurityContext.Capabilities.Drop).To(ContainElement(corev1.Capability("ALL")), "pod %s", p.Name)
			Expect(ct.Env).To(ContainElement(corev1.EnvVar{Name: "TMPDIR", Value: "/tmp"}), "pod %s", p.Name)
			var tmp string
			for _, m := range ct.VolumeMounts {
				if m.MountPath == "/tmp" {
					tmp = m.Name
				}
			}
			Expect(tmp).NotTo(BeEmpty(), "pod %s mounts a volume at /tmp", p.Name)
			for _, v := range p.Spec.Volumes {
				if v.Name == tmp {
					Expect(v.EmptyDir).NotTo(BeNil(), "pod %s: /tmp is an emptyDir", p.Name)
					Expect(v.EmptyDir.Medium).To(Equal(corev1.StorageMediumMemory), "pod %s", p.Name)
					Expect(v.EmptyDir.SizeLimit).NotTo(BeNil(), "pod %s", p.Name)
				}
			}
			Expect(p.Status.ContainerStatuses).NotTo(BeEmpty(), "pod %s", p.Name)
			Expect(p.Status.ContainerStatuses[0].Ready).To(BeTrue(), "pod %s runs so", p.Name)
		}
	})
})
