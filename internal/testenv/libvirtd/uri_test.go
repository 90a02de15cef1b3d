package libvirtd

import (
	"net/netip"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
)

func TestSocketURI(t *testing.T) {
	const sock = "/tmp/lvd-1/run/libvirt-sock"
	cases := map[string]struct {
		reason string
		driver string
		want   string
	}{
		"QEMUName": {
			reason: "A bare driver name selects its system URI.",
			driver: "qemu",
			want:   "qemu+unix:///system?socket=%2Ftmp%2Flvd-1%2Frun%2Flibvirt-sock",
		},
		"QEMUURI": {
			reason: "A driver URI gets the unix transport and the socket.",
			driver: "qemu:///system",
			want:   "qemu+unix:///system?socket=%2Ftmp%2Flvd-1%2Frun%2Flibvirt-sock",
		},
		"TestName": {
			reason: "The test driver's default instance is /default.",
			driver: "test",
			want:   "test+unix:///default?socket=%2Ftmp%2Flvd-1%2Frun%2Flibvirt-sock",
		},
		"TestFixture": {
			reason: "A test driver fixture path is kept.",
			driver: "test:///srv/fixture.xml",
			want:   "test+unix:///srv/fixture.xml?socket=%2Ftmp%2Flvd-1%2Frun%2Flibvirt-sock",
		},
		"Transport": {
			reason: "An explicit transport is replaced by unix.",
			driver: "qemu+tcp:///system",
			want:   "qemu+unix:///system?socket=%2Ftmp%2Flvd-1%2Frun%2Flibvirt-sock",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := socketURI(tc.driver, sock)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nsocketURI(%q): -want, +got:\n%s", tc.reason, tc.driver, diff)
			}
		})
	}
}

func TestNetworkAddressing(t *testing.T) {
	type want struct {
		gw, start, end string
		subnet         string
		err            error
	}
	cases := map[string]struct {
		reason string
		subnet string
		want   want
	}{
		"Slash24": {
			reason: "The gateway takes .1 and DHCP the rest but the broadcast address.",
			subnet: "192.168.150.0/24",
			want:   want{gw: "192.168.150.1", start: "192.168.150.2", end: "192.168.150.254", subnet: "192.168.150.0/24"},
		},
		"Unmasked": {
			reason: "Host bits of the subnet are ignored.",
			subnet: "10.9.8.77/16",
			want:   want{gw: "10.9.0.1", start: "10.9.0.2", end: "10.9.255.254", subnet: "10.9.0.0/16"},
		},
		"Slash30": {
			reason: "A /30 leaves exactly one DHCP address.",
			subnet: "10.0.0.4/30",
			want:   want{gw: "10.0.0.5", start: "10.0.0.6", end: "10.0.0.6", subnet: "10.0.0.4/30"},
		},
		"TooSmall": {
			reason: "A /31 has no room for a DHCP range.",
			subnet: "10.0.0.4/31",
			want:   want{err: errors.Errorf(errFmtSubnet, netip.MustParsePrefix("10.0.0.4/31"))},
		},
		"IPv6": {
			reason: "Only IPv4 subnets are supported.",
			subnet: "fd00::/64",
			want:   want{err: errors.Errorf(errFmtSubnet, netip.MustParsePrefix("fd00::/64"))},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			x, err := networkXML("n", netip.MustParsePrefix(tc.subnet))
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Fatalf("%s\nnetworkXML(%s): -want error, +got error:\n%s", tc.reason, tc.subnet, diff)
			}
			if err != nil {
				return
			}
			var p Prepared
			if err := describeNetwork(x, &p); err != nil {
				t.Fatalf("%s\ndescribeNetwork: %v\n%s", tc.reason, err, x)
			}
			got := want{gw: p.Gateway.String(), start: p.DHCPStart.String(), end: p.DHCPEnd.String(), subnet: p.Subnet.String()}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nnetworkXML(%s): -want, +got:\n%s", tc.reason, tc.subnet, diff)
			}
		})
	}
}

func TestDescribeNetworkNetmask(t *testing.T) {
	// libvirt may report the mask as netmask= rather than prefix=.
	const desc = `<network><name>n</name><ip address="172.16.0.1" netmask="255.255.0.0">` +
		`<dhcp><range start="172.16.0.10" end="172.16.0.20"/></dhcp></ip></network>`
	var p Prepared
	if err := describeNetwork(desc, &p); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("172.16.0.0/16", p.Subnet.String()); diff != "" {
		t.Errorf("subnet: -want, +got:\n%s", diff)
	}
}
