/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

const errFiles = "cannot write the node's configuration"

// ClusterDomain is the DNS domain of the node's cluster: the kubelet's
// clusterDomain, and the zone the cluster DNS serves.
const ClusterDomain = "cluster.local"

// resolvConf is the node's resolv.conf as its pods see it (the kubelet's
// resolvConf): no nameserver, so that no pod's lookup leaves the node's
// namespace, whatever the host's /etc/resolv.conf says. Pods of dnsPolicy
// ClusterFirst ask the cluster DNS only.
const resolvConf = "# No upstream: only the cluster DNS answers.\n"

// writeFiles writes the components' configuration into the node's folder,
// and creates the private folders the setup script bind-mounts.
func (n *Node) writeFiles(cfg Config) error {
	for _, d := range privateDirs {
		if err := os.MkdirAll(n.path("mnt", strings.ReplaceAll(strings.TrimPrefix(d, "/"), "/", "_")), 0o755); err != nil {
			return errors.Wrap(err, errFiles)
		}
	}
	for name, content := range n.files(cfg) {
		p := n.path(name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return errors.Wrap(err, errFiles)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil { //nolint:gosec // Not secret.
			return errors.Wrap(err, errFiles)
		}
	}
	return nil
}

// files returns the components' configuration by path in the node's
// folder.
func (n *Node) files(cfg Config) map[string]string {
	files := map[string]string{
		"containerd.toml":             n.containerdConfig(cfg.Images.Pause),
		"kubelet.yaml":                n.kubeletConfig(cfg),
		"resolv.conf":                 resolvConf,
		"cni/10-egressproxy.conflist": cniConfig,
	}
	for k, v := range sysctls {
		files["sysctl/"+strings.ReplaceAll(k, "/", "_")] = v + "\n"
	}
	for host, ca := range cfg.Registries {
		files[filepath.Join("certs.d", host, "hosts.toml")] = registryHosts(host, ca)
	}
	return files
}

// setupScript runs once inside the namespaces: the bridge exists before the
// kubelet starts (its node IP is the bridge's address), and the folders and
// kernel settings the node writes are private.
func (n *Node) setupScript() string {
	s := []string{
		"ip link set lo up",
		"ip link add " + bridgeName + " type bridge",
		"ip addr add " + bridgeCIDR + " dev " + bridgeName,
		"ip link set " + bridgeName + " up",
		// Per network namespace: the host's value stays as it is.
		"echo 1 >/proc/sys/net/ipv4/ip_forward",
		// Bridged traffic between pods passes kube-proxy's rules, as on
		// any node; absent without br_netfilter, where kube-proxy's
		// masqueradeAll still routes the replies through the node.
		"echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null || true",
	}
	for _, d := range privateDirs {
		s = append(s, fmt.Sprintf("mount --bind %s %s", n.path("mnt", strings.ReplaceAll(strings.TrimPrefix(d, "/"), "/", "_")), d))
	}
	for k := range sysctls {
		s = append(s, fmt.Sprintf("mount --bind %s /proc/sys/%s", n.path("sysctl", strings.ReplaceAll(k, "/", "_")), k))
	}
	return strings.Join(s, "\n")
}

// containerdConfig: cgroupfs as the kubelet's driver (cgroup v1 here),
// restrict_oom_score_adj because root may lack CAP_SYS_RESOURCE, without
// which runc fails every sandbox on oom_score_adj, and registry hosts read
// from certs.d, as a user trusts a private registry (registryHosts).
func (n *Node) containerdConfig(pause string) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
`, n.path("containerd", "root"), n.path("containerd", "state"), n.path("containerd.sock"), pause, n.path("cni"), n.path("certs.d"))
}

// registryHosts is containerd's hosts.toml for a registry at host (a
// host:port) whose serving certificate a private CA signs: containerd pulls
// from it over TLS, trusting the CA file ca for that host alone.
func registryHosts(host, ca string) string {
	return fmt.Sprintf(`server = "https://%[1]s"

[host."https://%[1]s"]
  capabilities = ["pull", "resolve"]
  ca = %[2]q
`, host, ca)
}

// kubeletConfig is kubeletBase with the node's cgroup root and resolv.conf,
// and, when the cluster has a DNS, its Service IP.
func (n *Node) kubeletConfig(cfg Config) string {
	s := kubeletBase + "cgroupRoot: /" + n.cgroup + "\nresolvConf: " + n.path("resolv.conf") + "\n"
	if cfg.ClusterDNS != "" {
		s += "clusterDNS:\n- " + cfg.ClusterDNS + "\nclusterDomain: " + ClusterDomain + "\n"
	}
	return s
}

// kubeletBase: cgroup v1 allowed, no iptables chains in any namespace,
// no image garbage collection (nothing could pull the images back), and
// eviction thresholds a busy test machine never reaches. StartKubelet's
// flags (--client-ca-file, --anonymous-auth=false) override the
// authentication below: the kubelet's API takes only the cluster CA's client
// certificates.
const kubeletBase = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
makeIPTablesUtilChains: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
failSwapOn: false
address: ` + BridgeIP + `
readOnlyPort: 0
healthzPort: 0
serializeImagePulls: false
nodeStatusUpdateFrequency: 2s
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%"
  imagefs.available: "1%"
  nodefs.inodesFree: "1%"
`

// cniConfig: a bridge with host-local addresses and no masquerade: pods
// reach only the node's own namespace. Their default route points at the
// node, so an address the harness binds there (traffic.AllowedOrigin) is
// reachable too; the namespace has no uplink, so nothing leaves it.
const cniConfig = `{
  "cniVersion": "0.4.0",
  "name": "egressproxy-node",
  "plugins": [{
    "type": "bridge",
    "bridge": "` + bridgeName + `",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": "` + PodSubnet + `", "gateway": "` + BridgeIP + `"}]],
      "routes": [{"dst": "0.0.0.0/0"}]
    }
  }]
}
`

// TrustRegistry makes containerd pull from the registry at host (a
// host:port) over TLS, trusting the CA file ca: what Config.Registries
// does at start, for a registry that comes later. containerd reads certs.d
// at every pull, so it holds at once.
func (n *Node) TrustRegistry(host, ca string) error {
	p := n.path("certs.d", host, "hosts.toml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return errors.Wrap(err, errFiles)
	}
	return errors.Wrap(os.WriteFile(p, []byte(registryHosts(host, ca)), 0o644), errFiles) //nolint:gosec // Not secret.
}
