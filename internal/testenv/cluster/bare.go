/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// StartBare brings up only what makes Deployments become available: the
// kube-apiserver and etcd with the provider's CRDs, kube-controller-manager,
// kwok with fake nodes and kube-scheduler. No Crossplane, no function, no
// provider: tests that run the provider themselves (the kill -9 suite) start
// it with StartProcess. On error it stops what it started.
func StartBare(ctx context.Context, o Options) (*Cluster, error) {
	if o.Nodes == 0 {
		o.Nodes = defaultNodes
	}
	c := &Cluster{opts: o, Dir: o.Dir}
	c.Tools.KubeControllerManager = cached("kube-controller-manager")
	c.Tools.KubeScheduler = cached("kube-scheduler")
	c.Tools.Kwok = cached("kwok")
	var missing []string
	for name, p := range map[string]string{
		"kube-controller-manager": c.Tools.KubeControllerManager,
		"kube-scheduler":          c.Tools.KubeScheduler,
		"kwok":                    c.Tools.Kwok,
	} {
		if p == "" {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		return nil, errors.Errorf(errFmtTools, strings.Join(missing, ", "), strings.Join(missing, " "))
	}
	if err := c.mkdirs(); err != nil {
		return nil, err
	}
	sup, err := newSupervisor(c.LogDir)
	if err != nil {
		return nil, err
	}
	c.sup = sup
	if c.tempDir {
		sup.removeOnAbort(c.Dir)
	}
	steps := []step{
		{name: "kube-apiserver and etcd", log: "envtest.log", fn: c.startBareControlPlane},
		{name: "kube-controller-manager", log: "kube-controller-manager.log", fn: c.startKCM},
		{name: "kwok and fake nodes", log: "kwok.log", fn: c.startNodes},
		{name: "kube-scheduler", log: "kube-scheduler.log", fn: c.startScheduler},
	}
	for _, s := range steps {
		sctx, cancel := context.WithTimeout(ctx, defaultTimeout)
		err := c.Step(sctx, s.name, s.log, s.fn)
		cancel()
		if err != nil {
			c.Keep()
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// startBareControlPlane starts kube-apiserver and etcd with the provider's
// CRDs, and not Crossplane's.
func (c *Cluster) startBareControlPlane(context.Context) error {
	return c.startKube(func() (*kube.Env, error) { return kube.New() })
}

// StartProcess runs a program like the Cluster's own: its output goes to
// LogDir/name.log, and it is stopped with the Cluster, or by the watchdog if
// this process dies first.
func (c *Cluster) StartProcess(name, bin string, args, env []string) (*Process, error) {
	return c.sup.start(name, bin, args, env)
}

// Kill kills the process with SIGKILL, as a crash or an OOM kill would, and
// waits until it has exited.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
	}
}
