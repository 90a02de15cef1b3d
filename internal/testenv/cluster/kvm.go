/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/libvirtd"
)

const (
	errFmtKVM = "cannot set up the private libvirtd: %s"
)

// ErrMissing is wrapped by a Start error whose cause is a component this
// machine cannot run (a private libvirtd without root, say): tests skip on
// it where they would fail on any other.
var ErrMissing = errors.New("a component cannot run on this machine")

// Libvirt is a running private libvirtd (hack/libvirt-sandbox.sh).
type Libvirt struct {
	// Daemon is the sandbox: its Base folder holds its logs.
	Daemon *libvirtd.Daemon
	// URI reaches the daemon, as ProviderConfig spec.uri.
	URI string
	// Prepared is its storage pool, NAT network and blank base volume.
	Prepared libvirtd.Prepared
}

// kvmSandboxComposition replaces the kvm Composition's input with what the
// sandbox has: QEMU without KVM (TCG), the blank base volume, the NAT
// network, and small VMs. A VM on a blank disk gets its DHCP lease, which
// makes it Ready, only if the provider boots it from the network first.
func kvmSandboxComposition() string {
	return fmt.Sprintf(`apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xegressproxies-kvm
  labels:
    egressproxy.io/backend: kvm
spec:
  compositeTypeRef:
    apiVersion: egressproxy.io/v1alpha1
    kind: XEgressProxy
  writeConnectionSecretsToNamespace: crossplane-system
  mode: Pipeline
  pipeline:
  - step: compose-proxy
    functionRef:
      name: %s
    input:
      apiVersion: egressproxy.fn.egressproxy.io/v1alpha1
      kind: Input
      backend: kvm
      providerConfigRef:
        kind: ClusterProviderConfig
        name: %s
      kvm:
        pool: %s
        baseImageVolume: %s
        network:
          name: %s
        domainType: qemu
        diskGiB: 1
        sizes:
          small: {vcpus: 1, memoryMiB: 256}
          medium: {vcpus: 1, memoryMiB: 256}
          large: {vcpus: 1, memoryMiB: 256}
`, FunctionName, ProviderConfigName, libvirtd.DefaultPool, libvirtd.DefaultBaseVolume, libvirtd.DefaultNetwork)
}

// setupKVM starts a private libvirtd with a pool, a NAT network and a blank
// base volume, points the kvm backend's ClusterProviderConfig default at it
// and adapts the kvm Composition to it.
func (c *Cluster) setupKVM(ctx context.Context) (err error) {
	t := testenv.NewOutside("cluster", c.logf)
	defer func() {
		r := recover()
		if r == nil {
			c.cleanups = append(c.cleanups, t.RunCleanups)
			return
		}
		t.RunCleanups()
		f, ok := r.(testenv.OutsideFailure)
		if !ok {
			panic(r)
		}
		err = errors.Errorf(errFmtKVM, f.Msg)
		if f.Skip {
			err = errors.Wrap(ErrMissing, err.Error())
		}
	}()
	d := libvirtd.Start(t)
	// The sandbox is no child of this process: if this one dies, the
	// watchdog stops the sandbox.
	c.sup.onAbort(shellQuote(filepath.Join(testenv.RepoRoot(), "hack", "libvirt-sandbox.sh")) + " stop " + shellQuote(d.Base))
	c.sup.removeOnAbort(d.Base)
	c.Libvirt = &Libvirt{Daemon: d, URI: d.URI("qemu"), Prepared: d.Prepare(t, libvirtd.PrepareOptions{})}
	if err := c.ApplyYAML(ctx, "kvm sandbox composition", []byte(kvmSandboxComposition())); err != nil {
		return err
	}
	return Apply(ctx, c.Client, KVMProviderConfig("ClusterProviderConfig", "", ProviderConfigName, c.Libvirt.URI))
}

// KVMProviderConfig returns a (Cluster)ProviderConfig of the kvm backend
// for a libvirt URI, without credentials (a local socket).
func KVMProviderConfig(kind, namespace, name, uri string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kvm.m.egressproxy.io/v1alpha1",
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"uri":         uri,
			"credentials": map[string]any{"source": "None"},
		},
	}}
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u
}
