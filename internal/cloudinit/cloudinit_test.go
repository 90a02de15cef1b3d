/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cloudinit

import (
	"bytes"
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// equateErrors is crossplane-runtime's test.EquateErrors (same type and same
// message), kept here because that package pulls client-go into this
// dependency-light package's tests.
func equateErrors() cmp.Option {
	return cmp.Comparer(func(a, b error) bool {
		if a == nil || b == nil {
			return a == nil && b == nil
		}
		return reflect.TypeOf(a) == reflect.TypeOf(b) && a.Error() == b.Error()
	})
}

const (
	testConf     = "http_port 3128\nauth_param basic program /usr/lib/squid/basic_ncsa_auth /etc/squid/egressproxy/htpasswd\n"
	testHtpasswd = "team-a:$2y$10$abcdefghijklmnopqrstuu5Vb2bJ0x0ZsQ0nqkLQ2fO9y6mEw2tJe\n"
)

func input(mods ...func(*Input)) Input {
	in := Input{SquidConf: []byte(testConf), Htpasswd: []byte(testHtpasswd)}
	for _, m := range mods {
		m(&in)
	}
	return in
}

func file(path, content, owner, perm string) writeFile {
	return writeFile{Path: path, Content: base64.StdEncoding.EncodeToString([]byte(content)), Encoding: "b64", Owner: owner, Permissions: perm, Defer: true}
}

func want(hostname, confPath, conf, htpasswdPath string) *cloudConfig {
	files := []writeFile{
		file(confPath, conf, "root:root", "0644"),
		file(htpasswdPath, testHtpasswd, "root:proxy", "0640"),
	}
	for _, f := range GuestFiles() {
		files = append(files, file(f.Path, f.Content, f.Owner, f.Permissions))
	}
	return &cloudConfig{
		Hostname:      hostname,
		PackageUpdate: true,
		Packages:      []string{"squid"},
		WriteFiles:    files,
		RunCmd: [][]string{
			{"systemctl", "daemon-reload"},
			{"systemctl", "enable", "squid"},
			{"systemctl", "restart", "squid"},
			{"systemctl", "enable", "--now", "egressproxy-traffic.service"},
		},
	}
}

func TestUserData(t *testing.T) {
	injected := "http_port 3128\nruncmd: [[rm, -rf, /]]\n" + testConf[len("http_port 3128\n"):]
	cases := map[string]struct {
		reason string
		in     Input
		want   *cloudConfig
		err    error
	}{
		"Defaults": {
			reason: "Empty paths take Debian's squid paths.",
			in:     input(),
			want:   want("", DefaultSquidConfPath, testConf, DefaultHtpasswdPath),
		},
		"HostnameAndPaths": {
			reason: "A hostname and custom paths are honoured.",
			in: input(func(in *Input) {
				in.Hostname = "egress-1.example"
				in.SquidConfPath = "/etc/squid3/squid.conf"
				in.HtpasswdPath = "/etc/squid3/users"
				in.SquidConf = []byte("auth_param basic program /usr/lib/squid/basic_ncsa_auth /etc/squid3/users\n")
			}),
			want: want("egress-1.example", "/etc/squid3/squid.conf", "auth_param basic program /usr/lib/squid/basic_ncsa_auth /etc/squid3/users\n", "/etc/squid3/users"),
		},
		"ContentCannotInject": {
			reason: "File contents are base64, so YAML in them stays content.",
			in:     input(func(in *Input) { in.SquidConf = []byte(injected) }),
			want:   want("", DefaultSquidConfPath, injected, DefaultHtpasswdPath),
		},
		"EmptyConf":        {"A config is required.", input(func(in *Input) { in.SquidConf = nil }), nil, errors.New(errEmptyConf)},
		"EmptyHtpasswd":    {"An htpasswd file is required.", input(func(in *Input) { in.Htpasswd = nil }), nil, errors.New(errEmptyHtpasswd)},
		"RelativeConfPath": {"Paths are absolute.", input(func(in *Input) { in.SquidConfPath = "squid.conf" }), nil, errors.New(`squidConfPath: "squid.conf" must be an absolute, clean path of letters, digits and . _ - /`)},
		"NewlineInPath":    {"Paths carry no newline.", input(func(in *Input) { in.HtpasswdPath = "/etc/a\nb" }), nil, errors.New(`htpasswdPath: "/etc/a\nb" must be an absolute, clean path of letters, digits and . _ - /`)},
		"SamePaths":        {"The two files cannot share a path.", input(func(in *Input) { in.HtpasswdPath = DefaultSquidConfPath }), nil, errors.New(errSamePath)},
		"BadHostname":      {"The hostname is RFC 1123.", input(func(in *Input) { in.Hostname = "a_b\nruncmd: x" }), nil, errors.New(`hostname: "a_b\nruncmd: x" is not an RFC 1123 hostname`)},
		"HtpasswdNotUsed":  {"The config must name the htpasswd path.", input(func(in *Input) { in.HtpasswdPath = "/etc/other/htpasswd" }), nil, errors.New(`squidConf does not use htpasswdPath "/etc/other/htpasswd": the proxy would not find its users`)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := UserData(tc.in)
			if diff := cmp.Diff(tc.err, err, equateErrors()); diff != "" {
				t.Fatalf("\n%s\nUserData(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if tc.want == nil {
				return
			}
			if !bytes.HasPrefix(got, []byte("#cloud-config\n")) {
				t.Errorf("\n%s\nUserData(...) does not start with #cloud-config", tc.reason)
			}
			parsed := &cloudConfig{}
			if err := yaml.UnmarshalStrict(got, parsed); err != nil {
				t.Fatalf("\n%s\nUserData(...) is not the expected YAML: %v\n%s", tc.reason, err, got)
			}
			if diff := cmp.Diff(tc.want, parsed); diff != "" {
				t.Errorf("\n%s\nUserData(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestUserDataDeterministic(t *testing.T) {
	a, errA := UserData(input())
	b, errB := UserData(input())
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Errorf("UserData(...) differs between two calls: %v %v\n%s", errA, errB, cmp.Diff(string(a), string(b)))
	}
}

func TestMetaData(t *testing.T) {
	cases := map[string]struct {
		reason       string
		id, hostname string
		want         map[string]string
		wantErr      error
	}{
		"WithHostname": {reason: "Both keys are set.", id: "i-123", hostname: "egress-1", want: map[string]string{"instance-id": "i-123", "local-hostname": "egress-1"}},
		"NoHostname":   {reason: "An empty hostname is left out.", id: "i-123", want: map[string]string{"instance-id": "i-123"}},
		"Hostile":      {reason: "Values stay values.", id: "i\nlocal-hostname: evil", hostname: "a: b", want: map[string]string{"instance-id": "i\nlocal-hostname: evil", "local-hostname": "a: b"}},
		"NoInstanceID": {reason: "An empty instance-id is an error, not a document cloud-init fills in.", hostname: "egress-1", wantErr: errors.New(errEmptyInstanceID)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := MetaData(tc.id, tc.hostname)
			if diff := cmp.Diff(tc.wantErr, err, equateErrors()); diff != "" {
				t.Fatalf("\n%s\nMetaData(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if tc.wantErr != nil {
				if b != nil {
					t.Errorf("\n%s\nMetaData(...): a document and an error", tc.reason)
				}
				return
			}
			got := map[string]string{}
			if err := yaml.UnmarshalStrict(b, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nMetaData(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestNetworkConfig(t *testing.T) {
	want := map[string]any{
		"version": float64(2),
		"ethernets": map[string]any{
			"all-ethernet": map[string]any{"match": map[string]any{"name": "e*"}, "dhcp4": true},
		},
	}
	got := map[string]any{}
	if err := yaml.UnmarshalStrict(NetworkConfig(), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NetworkConfig(): -want, +got:\n%s", diff)
	}
	if strings.Contains(string(NetworkConfig()), "\t") {
		t.Error("NetworkConfig() contains a tab, which YAML forbids for indentation")
	}
}

func TestNetworkConfigForMAC(t *testing.T) {
	type want struct {
		doc map[string]any
		err error
	}
	cases := map[string]struct {
		reason string
		mac    string
		want   want
	}{
		"Valid": {
			reason: "The NIC with the MAC becomes eth0 with DHCPv4; the MAC is normalised to lower case.",
			mac:    "52:54:00:AB:CD:EF",
			want: want{doc: map[string]any{
				"version": float64(2),
				"ethernets": map[string]any{"eth0": map[string]any{
					"match": map[string]any{"macaddress": "52:54:00:ab:cd:ef"}, "set-name": "eth0", "dhcp4": true,
				}},
			}},
		},
		"NotAMAC":  {"Garbage is refused.", "zz", want{err: errors.New(`mac: "zz" is not an EUI-48 MAC address`)}},
		"EUI64":    {"Only EUI-48 NICs are expected.", "01:23:45:67:89:ab:cd:ef", want{err: errors.New(`mac: "01:23:45:67:89:ab:cd:ef" is not an EUI-48 MAC address`)}},
		"Injected": {"A newline is refused.", "52:54:00:12:34:56\nversion: 1", want{err: errors.New(`mac: "52:54:00:12:34:56\nversion: 1" is not an EUI-48 MAC address`)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := NetworkConfigForMAC(tc.mac)
			if diff := cmp.Diff(tc.want.err, err, equateErrors()); diff != "" {
				t.Fatalf("\n%s\nNetworkConfigForMAC(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if tc.want.doc == nil {
				return
			}
			got := map[string]any{}
			if err := yaml.UnmarshalStrict(b, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want.doc, got); diff != "" {
				t.Errorf("\n%s\nNetworkConfigForMAC(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
