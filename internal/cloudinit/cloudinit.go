/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package cloudinit builds the cloud-init documents that turn a fresh VM into
// the egress proxy: user-data that installs squid and writes the squid
// configuration and htpasswd file the squid package rendered, plus the
// NoCloud meta-data and network-config the libvirt backend puts on its seed
// disk. GCE passes the same user-data in the instance's user-data metadata.
//
// Every document is marshalled from Go values, never concatenated, so no
// input can change the YAML structure. It uses the standard library's errors
// rather than crossplane-runtime's, which pulls in client-go.
package cloudinit

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"path"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// Defaults for Input paths: where Debian's squid package and its systemd unit
// read the configuration, and where the squid package's renderer points
// basic_ncsa_auth by default.
const (
	DefaultSquidConfPath = "/etc/squid/squid.conf"
	DefaultHtpasswdPath  = squid.DefaultHtpasswdPath
)

const (
	errEmptyConf       = "squidConf must not be empty"
	errEmptyHtpasswd   = "htpasswd must not be empty"
	errFmtPath         = "%s: %q must be an absolute, clean path of letters, digits and . _ - /"
	errFmtHostname     = "hostname: %q is not an RFC 1123 hostname"
	errFmtNotUsed      = "squidConf does not use htpasswdPath %q: the proxy would not find its users"
	errSamePath        = "squidConfPath and htpasswdPath must differ"
	errMarshal         = "cannot marshal cloud-config"
	errMarshalNetwork  = "cannot marshal network-config"
	errMarshalMetaData = "cannot marshal meta-data"
	errEmptyInstanceID = "instance-id must not be empty"
	errFmtMAC          = "mac: %q is not an EUI-48 MAC address"

	maxHostnameLen = 253
	maxPathLen     = 255
)

// Input is what a VM backend knows about the proxy it boots.
type Input struct {
	// Hostname optionally sets the VM's hostname.
	Hostname string
	// SquidConf is the configuration squid.Render returned.
	SquidConf []byte
	// Htpasswd is the file squid.Htpasswd returned.
	Htpasswd []byte
	// SquidConfPath is where squid's service reads its configuration;
	// DefaultSquidConfPath when empty. Only images whose squid unit reads
	// another file need to change it.
	SquidConfPath string
	// HtpasswdPath is where the htpasswd file goes; DefaultHtpasswdPath when
	// empty. It must be the HtpasswdPath SquidConf was rendered with.
	HtpasswdPath string
}

// cloudConfig is the subset of cloud-config the proxy uses.
type cloudConfig struct {
	Hostname      string      `json:"hostname,omitempty"`
	PackageUpdate bool        `json:"package_update"`
	Packages      []string    `json:"packages"`
	WriteFiles    []writeFile `json:"write_files"`
	RunCmd        [][]string  `json:"runcmd"`
}

type writeFile struct {
	Path        string `json:"path"`
	Content     string `json:"content"`
	Encoding    string `json:"encoding"`
	Owner       string `json:"owner"`
	Permissions string `json:"permissions"`
	// Defer writes the file in the final stage, after the squid package is
	// installed: the package then never meets a squid.conf it did not ship
	// (a dpkg conffile prompt), and group proxy surely exists.
	Defer bool `json:"defer"`
}

// UserData returns a "#cloud-config" document that installs squid, writes its
// configuration (0644 root:root), htpasswd file (0640 root:proxy, so only
// squid's helper can read it) and GuestFiles, enables and restarts squid, and
// starts the traffic counter.
func UserData(in Input) ([]byte, error) {
	in, err := validate(in)
	if err != nil {
		return nil, err
	}
	cc := cloudConfig{
		Hostname:      in.Hostname,
		PackageUpdate: true,
		Packages:      []string{"squid"},
		WriteFiles: []writeFile{
			{Path: in.SquidConfPath, Content: b64(in.SquidConf), Encoding: "b64", Owner: "root:root", Permissions: "0644", Defer: true},
			{Path: in.HtpasswdPath, Content: b64(in.Htpasswd), Encoding: "b64", Owner: "root:proxy", Permissions: "0640", Defer: true},
		},
		// runcmd runs after the deferred files are written. The package
		// started squid with its stock configuration; restart loads ours
		// (and the journal drop-in GuestFiles adds).
		RunCmd: [][]string{
			{"systemctl", "daemon-reload"},
			{"systemctl", "enable", "squid"},
			{"systemctl", "restart", "squid"},
			{"systemctl", "enable", "--now", TrafficUnit},
		},
	}
	for _, f := range GuestFiles() {
		cc.WriteFiles = append(cc.WriteFiles, writeFile{Path: f.Path, Content: b64([]byte(f.Content)), Encoding: "b64", Owner: f.Owner, Permissions: f.Permissions, Defer: true})
	}
	body, err := yaml.Marshal(cc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", errMarshal, err)
	}
	return append([]byte("#cloud-config\n"), body...), nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func validate(in Input) (Input, error) {
	if in.SquidConfPath == "" {
		in.SquidConfPath = DefaultSquidConfPath
	}
	if in.HtpasswdPath == "" {
		in.HtpasswdPath = DefaultHtpasswdPath
	}
	switch {
	case len(in.SquidConf) == 0:
		return Input{}, errors.New(errEmptyConf)
	case len(in.Htpasswd) == 0:
		return Input{}, errors.New(errEmptyHtpasswd)
	case !cleanPath(in.SquidConfPath):
		return Input{}, fmt.Errorf(errFmtPath, "squidConfPath", in.SquidConfPath)
	case !cleanPath(in.HtpasswdPath):
		return Input{}, fmt.Errorf(errFmtPath, "htpasswdPath", in.HtpasswdPath)
	case in.SquidConfPath == in.HtpasswdPath:
		return Input{}, errors.New(errSamePath)
	case in.Hostname != "" && !isHostname(in.Hostname):
		return Input{}, fmt.Errorf(errFmtHostname, in.Hostname)
	}
	// A cheap guard against wiring the wrong paths together: the rendered
	// configuration names the htpasswd file as a whole token.
	if !bytes.Contains(in.SquidConf, []byte(" "+in.HtpasswdPath+"\n")) {
		return Input{}, fmt.Errorf(errFmtNotUsed, in.HtpasswdPath)
	}
	return in, nil
}

func cleanPath(p string) bool {
	if len(p) > maxPathLen || !path.IsAbs(p) || path.Clean(p) != p {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; !isAlnum(c) && !strings.ContainsRune("._-/", rune(c)) {
			return false
		}
	}
	return true
}

func isHostname(h string) bool {
	if len(h) > maxHostnameLen {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			if !isAlnum(l[i]) && l[i] != '-' {
				return false
			}
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// MetaData returns NoCloud meta-data. The instance-id must change when the
// VM should be provisioned afresh, because cloud-init runs its per-instance
// modules only once per instance-id; an empty one is refused, since it could
// never change. An empty hostname is left out.
func MetaData(instanceID, hostname string) ([]byte, error) {
	if instanceID == "" {
		return nil, errors.New(errEmptyInstanceID)
	}
	m := map[string]string{"instance-id": instanceID}
	if hostname != "" {
		m["local-hostname"] = hostname
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", errMarshalMetaData, err)
	}
	return b, nil
}

// NetworkConfig returns NoCloud network-config (version 2) that runs DHCPv4
// on every ethernet NIC whose name starts with "e" (eth0, ens3, enp1s0), so it
// works whatever the image calls its NIC.
//
// Only images whose cloud-init renders network config with netplan (Ubuntu;
// Debian from trixie) honour the name glob: cloud-init 22.4's ENI and
// systemd-networkd renderers configure an interface literally named
// "all-ethernet" instead. On such images use NetworkConfigForMAC, or leave
// network-config off the seed so cloud-init falls back to DHCP on the first
// NIC.
func NetworkConfig() []byte {
	return []byte(`version: 2
ethernets:
  all-ethernet:
    match:
      name: "e*"
    dhcp4: true
`)
}

// NetworkConfigForMAC returns NoCloud network-config (version 2) that names
// the NIC with the given MAC address eth0 and runs DHCPv4 on it. Every
// cloud-init renderer (netplan, ENI, systemd-networkd) supports this, so it
// suits a backend that sets the VM's MAC address itself.
func NetworkConfigForMAC(mac string) ([]byte, error) {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return nil, fmt.Errorf(errFmtMAC, mac)
	}
	type ethernet struct {
		Match   map[string]string `json:"match"`
		SetName string            `json:"set-name"`
		DHCP4   bool              `json:"dhcp4"`
	}
	doc := struct {
		Version   int                 `json:"version"`
		Ethernets map[string]ethernet `json:"ethernets"`
	}{
		Version: 2,
		Ethernets: map[string]ethernet{
			"eth0": {Match: map[string]string{"macaddress": hw.String()}, SetName: "eth0", DHCP4: true},
		},
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", errMarshalNetwork, err)
	}
	return b, nil
}
