/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cloudinit

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/egressproxy/provider-egressproxy/internal/squid"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

const cloudInitHint = "Debian package cloud-init: hack/deps.sh cloud-init"

func runCloudInit(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := testenv.LookPath(t, "cloud-init", cloudInitHint)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput() //nolint:gosec // The test's own files.
	return string(out), err
}

// TestUserDataValidSchema runs cloud-init's own schema validation over
// user-data built from a real squid configuration.
func TestUserDataValidSchema(t *testing.T) {
	conf, err := squid.Render(squid.Config{
		Port:                    3128,
		ClientCIDRs:             []string{"10.0.0.0/8"},
		Destinations:            []string{".googleapis.com", "api.github.com", "203.0.113.0/24"},
		ConnectPorts:            []int32{443},
		DenyPrivateDestinations: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	htpasswd, err := squid.Htpasswd("team-a", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	ud, err := UserData(Input{Hostname: "egress-1", SquidConf: conf, Htpasswd: htpasswd})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "user-data")
	if err := os.WriteFile(f, ud, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCloudInit(t, "schema", "--config-file", f)
	if err != nil || !strings.Contains(out, "Valid cloud-config") {
		t.Errorf("cloud-init schema --config-file: %v\n%s\nuser-data:\n%s", err, out, ud)
	}
}

// TestNetworkConfigConverts has cloud-init render the network-config for
// each of its renderers, which shows what it parses the documents into: the
// name glob survives only in netplan, while the MAC form reaches every one.
func TestNetworkConfigConverts(t *testing.T) {
	byMAC, err := NetworkConfigForMAC("52:54:00:12:34:56")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason   string
		config   []byte
		renderer string
		want     []string
	}{
		"GlobNetplan": {"netplan keeps the name glob.", NetworkConfig(), "netplan", []string{"name: e*", "dhcp4: true"}},
		"MACNetplan":  {"netplan matches the MAC.", byMAC, "netplan", []string{"macaddress: '52:54:00:12:34:56'", "set-name: eth0", "dhcp4: true"}},
		"MACENI":      {"ENI names the NIC by a udev rule.", byMAC, "eni", []string{`ATTR{address}=="52:54:00:12:34:56", NAME="eth0"`, "iface eth0 inet dhcp"}},
		"MACNetworkd": {"networkd matches the MAC.", byMAC, "networkd", []string{"MACAddress=52:54:00:12:34:56", "Name=eth0", "DHCP=ipv4"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			f := filepath.Join(dir, "network-config")
			if err := os.WriteFile(f, tc.config, 0o600); err != nil {
				t.Fatal(err)
			}
			outDir := filepath.Join(dir, "out")
			out, err := runCloudInit(t, "devel", "net-convert", "-p", f, "-k", "yaml", "-d", outDir, "-D", "debian", "-O", tc.renderer)
			if err != nil {
				t.Fatalf("cloud-init devel net-convert: %v\n%s", err, out)
			}
			got := readTree(t, outDir)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("\n%s\n%s output lacks %q:\n%s", tc.reason, tc.renderer, w, got)
				}
			}
		})
	}
}

// readTree concatenates every file under dir.
func readTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p) //nolint:gosec // The test's own output.
		b.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
