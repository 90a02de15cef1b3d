/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	errNoControlPlane = "the node's control plane is not started"
	errKubeconfig     = "cannot write a kubeconfig of the control plane"
	errFmtNotReady    = "kube-apiserver did not become ready in %s: %v"
	errFmtExited      = "%s exited"

	apiServerTimeout = 2 * time.Minute
)

// A ControlPlane is etcd and kube-apiserver running inside the node's
// network namespace, where the kubelet and the pods are: the apiserver
// reaches the kubelet and the pods directly, and pods reach it at the
// kubernetes Service, its DNS names or BridgeIP, with a serving certificate
// for all of them and a ServiceAccount token (the ServiceAccount admission
// plugin is on). The host reaches it through a forwarder on its loopback.
type ControlPlane struct {
	// CAFile is the cluster CA's certificate; CA its PEM.
	CAFile string
	CA     []byte
	// Config reaches the apiserver from the host as a member of
	// system:masters; Kubeconfig is a file for it.
	Config     *rest.Config
	Kubeconfig string
	// NodeKubeconfig is Kubeconfig for programs in the node's network
	// namespace (the kubelet, kube-controller-manager, kube-scheduler,
	// kube-proxy): https://127.0.0.1:APIServerPort, its loopback.
	NodeKubeconfig string
	// InClusterKubeconfig is Kubeconfig for pods:
	// https://kubernetes.default.svc, the name in-cluster clients dial.
	InClusterKubeconfig string
	// ServiceAccountKey signs the ServiceAccount tokens (for
	// kube-controller-manager's token controller).
	ServiceAccountKey string
}

// ControlPlaneBinaries are the programs of a ControlPlane.
type ControlPlaneBinaries struct {
	Etcd, APIServer string
}

// StartControlPlane makes the cluster's certificates and starts etcd and
// kube-apiserver in the node's namespaces, and waits until the apiserver is
// ready. Stop stops them.
func (n *Node) StartControlPlane(ctx context.Context, bin ControlPlaneBinaries) (*ControlPlane, error) {
	p, err := newPKI(n.path("pki"))
	if err != nil {
		return nil, err
	}
	for _, err := range []error{
		p.serving("apiserver", apiServerNames, apiServerIPs),
		p.client("admin", "egressproxy-admin", "system:masters"),
		p.client("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"),
		p.keyPair("sa"),
	} {
		if err != nil {
			return nil, err
		}
	}
	// etcd listens on the node's loopback only: pods have loopbacks of
	// their own.
	if err := n.startProc("etcd", bin.Etcd,
		"--data-dir", n.path("etcd"),
		"--listen-client-urls", "http://127.0.0.1:2379",
		"--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380",
		"--unsafe-no-fsync", "--log-level", "warn"); err != nil {
		return nil, err
	}
	audit, err := n.auditFlags()
	if err != nil {
		return nil, err
	}
	// Default admission plugins, ServiceAccount included. The lease
	// endpoint reconciler publishes BridgeIP:APIServerPort as the
	// kubernetes Service's endpoint; an audit log (audit.go).
	if err := n.startProc("kube-apiserver", withFlags(audit, bin.APIServer,
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0",
		"--secure-port="+strconv.Itoa(APIServerPort),
		"--advertise-address="+BridgeIP,
		"--service-cluster-ip-range="+ServiceCIDR,
		"--cert-dir="+n.path("pki", "apiserver-generated"),
		"--tls-cert-file="+p.file("apiserver.crt"),
		"--tls-private-key-file="+p.file("apiserver.key"),
		"--client-ca-file="+p.file("ca.crt"),
		"--service-account-key-file="+p.file("sa.pub"),
		"--service-account-signing-key-file="+p.file("sa.key"),
		"--service-account-issuer="+ServiceAccountIssuer,
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--kubelet-client-certificate="+p.file("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+p.file("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP")...); err != nil {
		return nil, err
	}
	host, err := n.ExposeToHost(net.JoinHostPort("127.0.0.1", strconv.Itoa(APIServerPort)))
	if err != nil {
		return nil, err
	}
	cp, err := n.writeKubeconfigs(p, host)
	if err != nil {
		return nil, err
	}
	if err := n.waitReady(ctx, cp.Config); err != nil {
		return nil, errors.Errorf("%v\nkube-apiserver:\n%s\netcd:\n%s", err, n.Log("kube-apiserver", 20), n.Log("etcd", 10))
	}
	n.ControlPlane = cp
	return cp, nil
}

// writeKubeconfigs writes the admin kubeconfigs for the host (through the
// forwarder at host), the node's network namespace and pods.
func (n *Node) writeKubeconfigs(p *pki, host string) (*ControlPlane, error) {
	ca, err := p.read("ca.crt")
	if err != nil {
		return nil, err
	}
	crt, err := p.read("admin.crt")
	if err != nil {
		return nil, err
	}
	key, err := p.read("admin.key")
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{
		CAFile: p.file("ca.crt"), CA: ca, ServiceAccountKey: p.file("sa.key"),
		Config: &rest.Config{
			Host:            "https://" + host,
			TLSClientConfig: rest.TLSClientConfig{CAData: ca, CertData: crt, KeyData: key},
		},
		Kubeconfig:          n.path("kubeconfig"),
		NodeKubeconfig:      n.path("kubeconfig-node"),
		InClusterKubeconfig: n.path("kubeconfig-in-cluster"),
	}
	for path, server := range map[string]string{
		cp.Kubeconfig:          cp.Config.Host,
		cp.NodeKubeconfig:      fmt.Sprintf("https://127.0.0.1:%d", APIServerPort),
		cp.InClusterKubeconfig: "https://kubernetes.default.svc",
	} {
		kc := clientcmdapi.NewConfig()
		kc.Clusters["egressproxy"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
		kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
		kc.Contexts["egressproxy"] = &clientcmdapi.Context{Cluster: "egressproxy", AuthInfo: "admin"}
		kc.CurrentContext = "egressproxy"
		if err := clientcmd.WriteToFile(*kc, path); err != nil {
			return nil, errors.Wrap(err, errKubeconfig)
		}
	}
	return cp, nil
}

// waitReady waits until the apiserver answers /readyz with 200, or exits.
func (n *Node) waitReady(ctx context.Context, cfg *rest.Config) error {
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return err
	}
	c := &http.Client{Transport: rt, Timeout: 5 * time.Second}
	ctx, cancel := context.WithTimeout(ctx, apiServerTimeout)
	defer cancel()
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/readyz", nil)
		rsp, err := c.Do(req)
		if err == nil {
			_ = rsp.Body.Close()
			if rsp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.Errorf("/readyz: %s", rsp.Status)
		}
		last = err
		if name := n.exited(); name != "" {
			return errors.Errorf(errFmtExited, name)
		}
		select {
		case <-ctx.Done():
			return errors.Errorf(errFmtNotReady, apiServerTimeout, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
