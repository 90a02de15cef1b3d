/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kube

import (
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// NodeFlags are the kube-apiserver flags a control plane with a real kubelet
// needs: the kubelet's InternalIP (the node's bridge address) is how the
// apiserver reaches it, and no endpoint reconciler publishes the loopback
// address the apiserver binds to.
var NodeFlags = map[string]string{
	"kubelet-preferred-address-types": "InternalIP",
	"endpoint-reconciler-type":        "none",
}

// NewWithFlags is New with extra kube-apiserver flags (name without "--").
func NewWithFlags(flags map[string]string, extraCRDDirs ...string) (*Env, error) {
	return newEnv(flags, append(CRDDirs(), extraCRDDirs...))
}

// NewWithoutProviderCRDs is NewWithFlags without the provider's CRDs, with
// only crdDirs: for a control plane where Crossplane's package manager
// installs them from the Provider package.
func NewWithoutProviderCRDs(flags map[string]string, crdDirs ...string) (*Env, error) {
	return newEnv(flags, crdDirs)
}

func newEnv(flags map[string]string, crdDirs []string) (*Env, error) {
	bin := BinDir()
	if bin == "" {
		return nil, errors.New(errNoBinaries)
	}
	e := &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: true,
	}
	args := e.ControlPlane.GetAPIServer().Configure()
	for k, v := range flags {
		args.Set(k, v)
	}
	cfg, err := e.Start()
	if err != nil {
		return nil, errors.Wrap(err, errStart)
	}
	env := &Env{Config: cfg, env: e, BinDir: bin}
	if err := env.init(); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return env, nil
}

// StartWithFlags is Start with extra kube-apiserver flags.
func StartWithFlags(t testing.TB, flags map[string]string, extraCRDDirs ...string) *Env {
	t.Helper()
	if BinDir() == "" {
		testenv.Missing(t, errNoBinaries)
	}
	e, err := NewWithFlags(flags, extraCRDDirs...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(e.Stop)
	return e
}
