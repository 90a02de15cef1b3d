/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package node

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

func TestFiles(t *testing.T) {
	n := &Node{Name: "egressproxy-node", dir: "/n", cgroup: "egressproxy-1"}
	type want struct {
		// kubelet are the kubelet.yaml fields this test looks at.
		kubelet map[string]any
		// registries are the files under certs.d.
		registries map[string]string
	}
	cases := map[string]struct {
		reason string
		cfg    Config
		want   want
	}{
		"NoDNSNoRegistry": {
			reason: "Without a cluster DNS pods get the node's resolv.conf, which names no nameserver, and containerd trusts no private registry.",
			cfg:    Config{},
			want: want{
				kubelet: map[string]any{
					"cgroupRoot":    "/egressproxy-1",
					"resolvConf":    "/n/resolv.conf",
					"clusterDNS":    nil,
					"clusterDomain": nil,
				},
				registries: map[string]string{},
			},
		},
		"DNSAndRegistries": {
			reason: "The kubelet gives pods the cluster DNS; containerd pulls from each registry over TLS, trusting its CA for that host only.",
			cfg: Config{
				ClusterDNS: "10.96.0.10",
				Registries: map[string]string{"10.88.0.1:5000": "/pki/ca.crt", "127.0.0.1:443": "/other ca.crt"},
			},
			want: want{
				kubelet: map[string]any{
					"cgroupRoot":    "/egressproxy-1",
					"resolvConf":    "/n/resolv.conf",
					"clusterDNS":    []any{"10.96.0.10"},
					"clusterDomain": "cluster.local",
				},
				registries: map[string]string{
					"certs.d/10.88.0.1:5000/hosts.toml": `server = "https://10.88.0.1:5000"

[host."https://10.88.0.1:5000"]
  capabilities = ["pull", "resolve"]
  ca = "/pki/ca.crt"
`,
					"certs.d/127.0.0.1:443/hosts.toml": `server = "https://127.0.0.1:443"

[host."https://127.0.0.1:443"]
  capabilities = ["pull", "resolve"]
  ca = "/other ca.crt"
`,
				},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			files := n.files(tc.cfg)
			var kubelet map[string]any
			if err := yaml.UnmarshalStrict([]byte(files["kubelet.yaml"]), &kubelet); err != nil {
				t.Fatalf("kubelet.yaml: %v", err)
			}
			got := want{kubelet: map[string]any{}, registries: map[string]string{}}
			for k := range tc.want.kubelet {
				got.kubelet[k] = kubelet[k]
			}
			for p, c := range files {
				if strings.HasPrefix(p, "certs.d/") {
					got.registries[p] = c
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nn.files(...): -want, +got:\n%s", tc.reason, diff)
			}
			if !strings.Contains(files["containerd.toml"], "config_path = \"/n/certs.d\"") {
				t.Errorf("containerd.toml must read the registry hosts from /n/certs.d:\n%s", files["containerd.toml"])
			}
			if strings.Contains(files["resolv.conf"], "nameserver") {
				t.Errorf("resolv.conf must name no nameserver: no lookup may leave the node:\n%s", files["resolv.conf"])
			}
		})
	}
}

// TestKubeProxyConfig has the real kube-proxy read its configuration
// (strictly: a field it does not know would only log a warning at run
// time) and checks the settings that keep it inside the node's namespace
// and within what root may do here, as kube-proxy resolved them.
func TestKubeProxyConfig(t *testing.T) {
	bin := testenv.Tool(t, "kube-proxy")
	dir := t.TempDir()
	n := &Node{Name: "egressproxy-node", dir: dir}
	in := filepath.Join(dir, "in.yaml")
	if err := os.WriteFile(in, []byte(n.kubeProxyConfig("/pki/kube-proxy.kubeconfig")), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.yaml")
	log, err := exec.CommandContext(t.Context(), bin, "--config", in, "--write-config-to", out).CombinedOutput()
	if err != nil || strings.Contains(string(log), "strict decoding") {
		t.Fatalf("kube-proxy does not accept its configuration: %v\n%s", err, log)
	}
	b, err := os.ReadFile(out) //nolint:gosec // Test's own file.
	if err != nil {
		t.Fatal(err)
	}
	var resolved map[string]any
	if err := yaml.Unmarshal(b, &resolved); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"clientConnection.kubeconfig":     "/pki/kube-proxy.kubeconfig",
		"hostnameOverride":                "egressproxy-node",
		"bindAddress":                     "10.88.0.1",
		"healthzBindAddress":              "127.0.0.1:10256",
		"metricsBindAddress":              "127.0.0.1:10249",
		"mode":                            "iptables",
		"clusterCIDR":                     "10.88.0.0/16",
		"nodePortAddresses":               []any{"10.88.0.1/32"},
		"oomScoreAdj":                     float64(0),
		"iptables.masqueradeAll":          true,
		"iptables.localhostNodePorts":     false,
		"conntrack.maxPerCore":            float64(0),
		"conntrack.min":                   float64(0),
		"conntrack.tcpEstablishedTimeout": "0s",
		"conntrack.tcpCloseWaitTimeout":   "0s",
		"conntrack.udpTimeout":            "0s",
		"conntrack.udpStreamTimeout":      "0s",
		"conntrack.tcpBeLiberal":          false,
	}
	got := map[string]any{}
	for k := range want {
		var v any = resolved
		for _, f := range strings.Split(k, ".") {
			m, _ := v.(map[string]any)
			v = m[f]
		}
		got[k] = v
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kube-proxy's resolved configuration: -want, +got:\n%s", diff)
	}
}
