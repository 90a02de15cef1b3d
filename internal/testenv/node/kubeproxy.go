/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package node

import (
	"fmt"
	"os"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

const (
	errKubeProxyConfig = "cannot write kube-proxy's configuration"
	errFmtRoute        = "cannot route %s to the node's bridge: %s"
)

// StartKubeProxy runs kube-proxy (the binary bin) in the node's namespaces,
// as the kubelet runs, reaching the apiserver with kubeconfig. Its iptables
// rules live in the node's network namespace only; Stop ends it with the
// kubelet. The service CIDRs get a route to the bridge: the node's
// namespace has no default route, and without a route a program there
// (the apiserver, a test's InNetNS) fails to dial a cluster IP before
// kube-proxy's rules see the packet. Pods route through the node anyway.
func (n *Node) StartKubeProxy(bin, kubeconfig string, serviceCIDRs []string) error {
	for _, cidr := range serviceCIDRs {
		if out, err := n.nsenter("ip", "route", "replace", cidr, "dev", bridgeName, "src", BridgeIP).CombinedOutput(); err != nil {
			return errors.Wrapf(err, errFmtRoute, cidr, out)
		}
	}
	p := n.path("kube-proxy.yaml")
	if err := os.WriteFile(p, []byte(n.kubeProxyConfig(kubeconfig)), 0o644); err != nil { //nolint:gosec // Not secret.
		return errors.Wrap(err, errKubeProxyConfig)
	}
	return n.startProc("kube-proxy", bin, "--config", p, "--v", "1")
}

// kubeProxyConfig is kube-proxy's configuration: iptables mode, serving
// Services on the node's address, with nothing that reaches beyond the
// node's network namespace:
//   - conntrack maxPerCore and min 0 leave nf_conntrack_max alone (it is
//     global, the host's), and the 0s timeouts leave the namespace's own.
//   - oomScoreAdj 0: the default -999 needs CAP_SYS_RESOURCE, which root
//     may lack here (the reason for containerd's restrict_oom_score_adj).
//   - masqueradeAll: a pod that reaches a Service backed by a pod on the
//     same bridge gets its replies back through the node, with or without
//     br_netfilter.
//   - no localhost node ports: they need route_localnet.
func (n *Node) kubeProxyConfig(kubeconfig string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
hostnameOverride: %q
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
mode: iptables
clusterCIDR: %s
nodePortAddresses:
- %s/32
oomScoreAdj: 0
iptables:
  masqueradeAll: true
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, n.Name, BridgeIP, PodSubnet, BridgeIP)
}
