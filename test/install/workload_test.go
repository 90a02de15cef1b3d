/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package install

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/pkgruntime"
)

// roleInjectedIdentity is the ClusterRole this project ships for the
// provider, beside the one Crossplane's RBAC manager makes
// (examples/rbac/provider-egressproxy.yaml).
const roleInjectedIdentity = pkgruntime.RoleInjectedIdentity

// workloads is the External package runtime (package pkgruntime): the
// runtime hooks' work, then the packages' binaries run as the Deployment
// runtime's pods would run them. Until RunPackages it reports no function
// endpoint.
type workloads struct {
	*pkgruntime.Runtime
	p *plane
}

func newWorkloads(ctx context.Context, t *testing.T, p *plane, dir string) *workloads {
	t.Helper()
	r, err := pkgruntime.Start(ctx, pkgruntime.Options{
		Config: p.cfg, Client: p.kube, Dir: dir, LogDir: p.logDir,
		Spawn: func(name, bin string, args, env []string) (pkgruntime.Process, error) {
			return spawnEnv(t, filepath.Join(p.logDir, name+".log"), env, bin, args...)
		},
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("external runtime: %v", err)
	}
	return &workloads{Runtime: r, p: p}
}
