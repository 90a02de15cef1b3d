/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/node"
)

const (
	errKCM       = "kube-controller-manager exited"
	errScheduler = "kube-scheduler exited"

	envStartTimeout = "KUBEBUILDER_CONTROLPLANE_START_TIMEOUT"

	// settle is how long kube-controller-manager and kube-scheduler must
	// stay up to count as started: they serve nothing (--secure-port=0) to
	// probe.
	settle = time.Second
)

// startControlPlane starts kube-apiserver and etcd with Crossplane's CRDs
// only: the provider's come from its package. The apiserver reaches the
// real node's kubelet (pods/log) through a node.Relay.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	crds, err := crossplaneCRDs(ctx, c.Tools.CrossplaneCore)
	if err != nil {
		return err
	}
	c.crossplaneCRDs = crds
	if c.relay, err = node.NewRelay(c.dir("relay")); err != nil {
		return err
	}
	flags := maps.Clone(kube.NodeFlags)
	maps.Copy(flags, c.relay.Flags())
	return c.startKube(func() (*kube.Env, error) { return kube.NewWithoutProviderCRDs(flags, crds) })
}

// startKube starts kube-apiserver and etcd with newEnv, under the
// supervisor's watch.
func (c *Cluster) startKube(newEnv func() (*kube.Env, error)) error {
	// envtest gives kube-apiserver 20 s to serve, then starts it again:
	// too short on two busy cores, where each retry makes it worse.
	if os.Getenv(envStartTimeout) == "" {
		_ = os.Setenv(envStartTimeout, "90s")
	}
	env, err := newEnv()
	if err != nil {
		return errors.Wrap(err, errCPStart)
	}
	c.kube = env
	for _, pid := range children("etcd", "kube-apiserver") {
		c.sup.adopt(pid)
		// envtest's folders, which its Stop would remove.
		c.sup.removeOnAbort(cmdlineFlag(pid, "data-dir"))
		c.sup.removeOnAbort(cmdlineFlag(pid, "cert-dir"))
	}
	c.sup.removeOnAbort(filepath.Dir(env.Kubeconfig))
	c.Config, c.Client = env.Config, env.Client
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	return errors.Wrap(kube.WriteKubeconfig(env.Config, c.Kubeconfig), errCPStart)
}

// startKCM runs kube-controller-manager: the garbage collector, and the
// Deployment, ReplicaSet, namespace and node-lifecycle controllers. It
// serves nothing (--secure-port=0), so it needs no serving certificates.
func (c *Cluster) startKCM(ctx context.Context) error {
	args := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers=*",
		// Without it, it creates /usr/libexec/kubernetes/... on the host.
		"--flex-volume-plugin-dir=" + c.dir("kcm", "flexvolume"),
	}
	// The apiserver's service account signing key lets the token
	// controller run too; envtest keeps it in its certificate folder.
	for _, pid := range children("kube-apiserver") {
		if key := cmdlineFlag(pid, "service-account-signing-key-file"); key != "" {
			args = append(args, "--service-account-private-key-file="+key)
		}
	}
	p, err := c.sup.start("kube-controller-manager", c.Tools.KubeControllerManager, args, nil)
	if err != nil {
		return err
	}
	return settled(ctx, p, errKCM)
}

// startScheduler runs kube-scheduler with its default profile: it places
// pods on the real node or on kwok's fake nodes by their nodeSelector,
// tolerations and resources, as on any cluster. Like
// kube-controller-manager it runs alone (--leader-elect=false) and serves
// nothing (--secure-port=0).
func (c *Cluster) startScheduler(ctx context.Context) error {
	args := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
	}
	p, err := c.sup.start("kube-scheduler", c.Tools.KubeScheduler, args, nil)
	if err != nil {
		return err
	}
	return settled(ctx, p, errScheduler)
}

// settled waits until p has stayed up for settle, and fails with msg if it
// exits first.
func settled(ctx context.Context, p *Process, msg string) error {
	select {
	case <-p.Exited():
		return errors.Wrap(p.Err(), msg)
	case <-time.After(settle):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startNodes runs kwok and creates the fake nodes.
func (c *Cluster) startNodes(ctx context.Context) error {
	p, err := c.startKwok()
	if err != nil {
		return errors.Wrap(err, errKwokStart)
	}
	return c.createNodes(ctx, p)
}

// coreInitAndTLS runs core init and writes core's client certificate.
func (c *Cluster) coreInitAndTLS(ctx context.Context) error {
	if err := ensureNamespace(ctx, c.Client, CrossplaneNamespace); err != nil {
		return err
	}
	if err := c.coreInit(ctx); err != nil {
		return err
	}
	return c.writeClientTLS(ctx)
}
