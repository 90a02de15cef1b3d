/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/node"
)

const (
	errKCM       = "kube-controller-manager exited"
	errCRDs      = "cannot install Crossplane's CRDs"
	errScheduler = "kube-scheduler exited"

	envStartTimeout = "KUBEBUILDER_CONTROLPLANE_START_TIMEOUT"

	// settle is how long kube-controller-manager and kube-scheduler must
	// stay up to count as started: they serve nothing (--secure-port=0) to
	// probe.
	settle = time.Second
)

// startNodeControlPlane starts etcd and kube-apiserver inside the real
// node's network namespace (node.ControlPlane), with no CRDs: Crossplane's
// chart installs its own, the packages the rest. The host reaches the
// apiserver through a forwarder on its loopback (Config, Kubeconfig).
func (c *Cluster) startNodeControlPlane(ctx context.Context) error {
	crds, err := crossplaneCRDs(ctx, c.Tools.CrossplaneCore)
	if err != nil {
		return err
	}
	c.crossplaneCRDs = crds
	etcd, apiserver := cached("etcd"), cached("kube-apiserver")
	if etcd == "" || apiserver == "" {
		return errors.Errorf(errFmtTools, "etcd, kube-apiserver", "etcd kube-apiserver")
	}
	cp, err := c.Node.StartControlPlane(ctx, node.ControlPlaneBinaries{Etcd: etcd, APIServer: apiserver})
	if err != nil {
		return errors.Wrap(err, errCPStart)
	}
	c.Config = cp.Config
	if c.Client, err = kube.NewClient(cp.Config); err != nil {
		return errors.Wrap(err, errCPStart)
	}
	// Copies in the state folder, which Keep keeps; the node's own folder
	// goes with the node.
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	c.InClusterKubeconfig = filepath.Join(c.Dir, "kubeconfig-in-cluster")
	for from, to := range map[string]string{cp.Kubeconfig: c.Kubeconfig, cp.InClusterKubeconfig: c.InClusterKubeconfig} {
		b, err := os.ReadFile(from) //nolint:gosec // The node's own file.
		if err != nil {
			return errors.Wrap(err, errCPStart)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			return errors.Wrap(err, errCPStart)
		}
	}
	return nil
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
// Deployment, ReplicaSet, namespace, ServiceAccount and node-lifecycle
// controllers. It serves nothing (--secure-port=0), so it needs no serving
// certificates. With a real node it runs in the node's network namespace,
// beside the apiserver.
func (c *Cluster) startKCM(ctx context.Context) error {
	args := []string{
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers=*",
		// Without it, it creates /usr/libexec/kubernetes/... on the host.
		"--flex-volume-plugin-dir=" + c.dir("kcm", "flexvolume"),
	}
	if c.Node != nil {
		cp := c.Node.ControlPlane
		args = append(args, "--kubeconfig="+cp.NodeKubeconfig,
			"--root-ca-file="+cp.CAFile, "--service-account-private-key-file="+cp.ServiceAccountKey)
	} else {
		args = append(args, "--kubeconfig="+c.Kubeconfig)
		// The apiserver's service account signing key lets the token
		// controller run too; envtest keeps it in its certificate folder.
		for _, pid := range children("kube-apiserver") {
			if key := cmdlineFlag(pid, "service-account-signing-key-file"); key != "" {
				args = append(args, "--service-account-private-key-file="+key)
			}
		}
	}
	p, err := c.startControlPlaneProc("kube-controller-manager", c.Tools.KubeControllerManager, args)
	if err != nil {
		return err
	}
	return settled(ctx, p, errKCM)
}

// startScheduler runs kube-scheduler with its default profile: it places
// pods on the real node or on kwok's fake nodes by their nodeSelector,
// tolerations and resources, as on any cluster. Like
// kube-controller-manager it runs alone (--leader-elect=false), serves
// nothing (--secure-port=0), and runs beside the apiserver.
func (c *Cluster) startScheduler(ctx context.Context) error {
	kubeconfig := c.Kubeconfig
	if c.Node != nil {
		kubeconfig = c.Node.ControlPlane.NodeKubeconfig
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
	}
	p, err := c.startControlPlaneProc("kube-scheduler", c.Tools.KubeScheduler, args)
	if err != nil {
		return err
	}
	return settled(ctx, p, errScheduler)
}

// startControlPlaneProc runs a program of the control plane under the
// supervisor: in the real node's network namespace when there is one
// (nsenter does not fork there, so the supervisor's PID is the program's).
func (c *Cluster) startControlPlaneProc(name, bin string, args []string) (*Process, error) {
	if c.Node == nil {
		return c.sup.start(name, bin, args, nil)
	}
	return c.sup.start(name, "nsenter", append(append(c.Node.NetNSArgs(), bin), args...), nil)
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
