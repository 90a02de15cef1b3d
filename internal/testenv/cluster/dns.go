/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/node"
)

// ClusterDNS is the cluster DNS Service's IP (kube-system/kube-dns), the
// kubelet's clusterDNS: in the service CIDR, beside the kubernetes
// Service's 10.96.0.1.
const ClusterDNS = "10.96.0.10"

const (
	errNoNode          = "the cluster DNS and kube-proxy need the real node"
	errFmtCoreDNSImage = "cannot build the CoreDNS image (hack/coredns-image.sh): %v: %s"
	errCoreDNSRefs     = "cannot read the CoreDNS image's references"
	errDNSManifest     = "cannot render the CoreDNS manifest"
	errDNSAvailable    = "CoreDNS did not become Available"
	errFmtDNSLookup    = "the cluster DNS at %s does not answer %s with the kubernetes Service's IP"
	errKubernetesSvc   = "cannot get the kubernetes Service"
	errFmtKubeProxy    = "kube-proxy does not serve the kubernetes Service at %s"
	errStartKubeProxy  = "cannot start kube-proxy"
	errServiceCIDRs    = "cannot list the ServiceCIDRs"
	dnsTimeout         = 2 * time.Minute
)

//go:embed manifests/coredns.yaml
var corednsManifest string

// startKubeProxy runs kube-proxy on the real node and waits until it
// serves the kubernetes Service's cluster IP inside the node's network
// namespace, where every pod and the control plane reach it.
func (c *Cluster) startKubeProxy(ctx context.Context) error {
	if c.Node == nil {
		return errors.New(errNoNode)
	}
	// The apiserver made these from its --service-cluster-ip-range.
	cidrs := &networkingv1.ServiceCIDRList{}
	if err := c.Client.List(ctx, cidrs); err != nil {
		return errors.Wrap(err, errServiceCIDRs)
	}
	var ranges []string
	for _, sc := range cidrs.Items {
		ranges = append(ranges, sc.Spec.CIDRs...)
	}
	if err := c.Node.StartKubeProxy(c.Tools.KubeProxy, c.Node.ControlPlane.NodeKubeconfig, ranges); err != nil {
		return errors.Wrap(err, errStartKubeProxy)
	}
	svc := &corev1.Service{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, svc); err != nil {
		return errors.Wrap(err, errKubernetesSvc)
	}
	addr := net.JoinHostPort(svc.Spec.ClusterIP, "443")
	err := c.waitFor(ctx, nil, dnsTimeout, fmt.Sprintf(errFmtKubeProxy, addr), func(ctx context.Context) (bool, error) {
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		conn, err := c.Node.DialContext(dctx, "tcp", addr)
		if err != nil {
			return false, nil
		}
		_ = conn.Close()
		return true, nil
	})
	if err != nil {
		return errors.Errorf("%v\nkube-proxy:\n%s", err, c.Node.Log("kube-proxy", 30))
	}
	return nil
}

// startDNS runs CoreDNS at ClusterDNS from the image hack/coredns-image.sh
// built, imported into the real node, and waits until it answers from the
// node's network namespace, through kube-proxy, as pods ask it.
func (c *Cluster) startDNS(ctx context.Context) error {
	if c.Node == nil {
		return errors.New(errNoNode)
	}
	archive, ref, err := findCoreDNSImage()
	if err != nil {
		return err
	}
	if err := c.Node.ImportImage(archive); err != nil {
		return err
	}
	manifest, err := renderCoreDNS(ref)
	if err != nil {
		return err
	}
	if err := c.ApplyYAML(ctx, "coredns.yaml", manifest); err != nil {
		return err
	}
	if err := c.waitFor(ctx, nil, dnsTimeout, errDNSAvailable, c.corednsAvailable); err != nil {
		return err
	}
	svc := &corev1.Service{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, svc); err != nil {
		return errors.Wrap(err, errKubernetesSvc)
	}
	name := "kubernetes.default.svc." + node.ClusterDomain + "."
	r := c.nodeResolver()
	return c.waitFor(ctx, nil, dnsTimeout, fmt.Sprintf(errFmtDNSLookup, ClusterDNS, name), func(ctx context.Context) (bool, error) {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		addrs, err := r.LookupHost(lctx, name)
		return err == nil && slices.Equal(addrs, []string{svc.Spec.ClusterIP}), nil
	})
}

// nodeResolver asks the cluster DNS from inside the node's network
// namespace, whatever the host's resolv.conf says.
func (c *Cluster) nodeResolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return c.Node.DialContext(ctx, network, net.JoinHostPort(ClusterDNS, "53"))
	}}
}

// corednsAvailable reports whether the CoreDNS Deployment is Available.
func (c *Cluster) corednsAvailable(ctx context.Context) (bool, error) {
	d := &appsv1.Deployment{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "coredns"}, d); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	for _, cond := range d.Status.Conditions {
		if cond.Type == appsv1.DeploymentAvailable {
			return cond.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}

// findCoreDNSImage returns the archive and reference of the CoreDNS image
// hack/coredns-image.sh builds (from the cached CoreDNS binary).
func findCoreDNSImage() (archive, ref string, err error) {
	// build: the image takes seconds once the binary is cached, and its
	// cache key follows the script, hack/mkimage and the binary.
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "coredns-image.sh"), "build")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		return "", "", errors.Errorf(errFmtCoreDNSImage, err, strings.TrimSpace(stderr.String()))
	}
	refs, err := os.ReadFile(filepath.Join(dir, "refs")) //nolint:gosec // Our own cache.
	if err != nil {
		return "", "", errors.Wrap(err, errCoreDNSRefs)
	}
	for _, l := range strings.Split(string(refs), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "coredns" {
			return filepath.Join(dir, "coredns.tar"), f[1], nil
		}
	}
	return "", "", errors.New(errCoreDNSRefs)
}

// renderCoreDNS fills in the CoreDNS manifest.
func renderCoreDNS(image string) ([]byte, error) {
	t, err := template.New("coredns.yaml").Option("missingkey=error").Parse(corednsManifest)
	if err != nil {
		return nil, errors.Wrap(err, errDNSManifest)
	}
	var b bytes.Buffer
	err = t.Execute(&b, map[string]string{"Image": image, "ClusterIP": ClusterDNS, "Domain": node.ClusterDomain})
	return b.Bytes(), errors.Wrap(err, errDNSManifest)
}
