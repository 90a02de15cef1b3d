/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/netip"
	"slices"
	"sort"
	"strconv"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"google.golang.org/protobuf/proto"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/cloudinit"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// Metadata keys of the instance.
const (
	// MetadataUserData is read by cloud-init on images that have it.
	MetadataUserData = "user-data"
	// MetadataStartupScript provisions images without cloud-init.
	MetadataStartupScript = "startup-script"
	// MetadataConfigChecksum is the checksum of the squid configuration,
	// read back by Observe.
	MetadataConfigChecksum = "egressproxy-config-checksum"
	// MetadataHtpasswd is the htpasswd file (a bcrypt hash, never a
	// password), read back to tell whether the credentials changed.
	MetadataHtpasswd = "egressproxy-htpasswd"
	// MetadataGuestVersion is the version of what the startup-script and
	// user-data set up besides squid's configuration; see guestVersion.
	MetadataGuestVersion = "egressproxy-guest-version"
	// MetadataSquidConf is the squid configuration (base64) the guest's
	// watcher applies to the running squid when it changes.
	MetadataSquidConf = "egressproxy-squid-conf"
	// MetadataPort is the proxy port, which the watcher hands to
	// egressproxy-apply with the configuration.
	MetadataPort = "egressproxy-port"
)

// guestVersion changes whenever the guest set-up changes in a way that
// running VMs must get (version 2: the metadata guard; 3: the guest reports
// whether squid serves, which Ready waits for; 4: the metadata watcher that
// applies configuration changes live, and the traffic counter), so Observe
// reports older VMs as drift and they are replaced, once. A VM reads its
// startup-script at every boot, but cloud-init's user-data only once, and
// only a guest of version 4 or later watches its metadata.
const guestVersion = "4"

const (
	natName    = "External NAT"
	natType    = "ONE_TO_ONE_NAT"
	diskSizeGB = 10
)

const (
	errRender     = "cannot render the squid configuration"
	errHtpasswd   = "cannot write the htpasswd file for the proxy credentials"
	errUserData   = "cannot build the cloud-init user-data"
	errNoIPv4CIDR = "allowedClientCIDRs holds no IPv4 range: a GCE proxy is reachable over IPv4 only, and a firewall rule without source ranges would admit everyone"
)

// proxyScopes are the only OAuth scopes the VM's service account
// gets: enough for the Ops Agent to ship logs and metrics. Never
// cloud-platform: a proxy VM has no other use for a token, and a narrow one
// is worth less to whoever obtains it.
func proxyScopes() []string {
	return []string{
		"https://www.googleapis.com/auth/logging.write",
		"https://www.googleapis.com/auth/monitoring.write",
	}
}

// vmSquidConfig is the squid configuration of a VM proxy.
func vmSquidConfig(d Desired) squid.Config {
	c := backend.SquidConfig(d)
	c.AccessLogSyslog = cloudinit.AccessLogSyslog // the journal, where the traffic counter reads it
	return c
}

// proxyConfig is the rendered configuration an instance runs.
type proxyConfig struct {
	conf     []byte
	checksum string
	htpasswd []byte
	port     int32
}

// renderConfig renders d's squid configuration and htpasswd file. It keeps
// an existing htpasswd file that still accepts the credentials, so its salt
// (and the metadata holding it) does not change on every reconcile.
func renderConfig(v *squid.Verifier, d Desired, existing []byte) (proxyConfig, error) {
	conf, err := squid.Render(vmSquidConfig(d))
	if err != nil {
		return proxyConfig{}, backend.Permanent(errors.Wrap(err, errRender))
	}
	pc := proxyConfig{conf: conf, checksum: squid.Checksum(conf), htpasswd: existing, port: d.Proxy.Port}
	if pc.port == 0 {
		pc.port = backend.DefaultPort
	}
	if !v.HtpasswdMatches(existing, d.Credentials.Username, d.Credentials.Password) {
		if pc.htpasswd, err = v.HtpasswdCost(d.Credentials.Username, d.Credentials.Password, backend.HtpasswdCost(d.Credentials)); err != nil {
			return proxyConfig{}, backend.Permanent(errors.Wrap(err, errHtpasswd))
		}
	}
	return pc, nil
}

// buildMetadata returns the instance metadata: cloud-init user-data, the
// startup-script fallback that writes the same files and reports whether
// squid serves, the checksum and htpasswd Observe reads back, and the flag
// that lets the guest write its report.
func buildMetadata(pc proxyConfig) (*computepb.Metadata, error) {
	ud, err := cloudinit.UserData(cloudinit.Input{SquidConf: pc.conf, Htpasswd: pc.htpasswd})
	if err != nil {
		return nil, backend.Permanent(errors.Wrap(err, errUserData))
	}
	script := startupScript(reporterPath, reporterFiles(pc.checksum, pc.port), slices.Concat([]vmFile{
		{Path: cloudinit.DefaultSquidConfPath, Owner: "root:root", Mode: "0644", Content: pc.conf},
		{Path: cloudinit.DefaultHtpasswdPath, Owner: "root:proxy", Mode: "0640", Content: pc.htpasswd},
	}, metadataGuardFiles(), guestFiles(), watcherFiles()))
	item := func(k, v string) *computepb.Items {
		return &computepb.Items{Key: proto.String(k), Value: proto.String(v)}
	}
	return &computepb.Metadata{Items: []*computepb.Items{
		item(MetadataUserData, string(ud)),
		item(MetadataStartupScript, script),
		item(MetadataConfigChecksum, pc.checksum),
		item(MetadataHtpasswd, string(pc.htpasswd)),
		item(MetadataGuestVersion, guestVersion),
		item(MetadataSquidConf, base64.StdEncoding.EncodeToString(pc.conf)),
		item(MetadataPort, strconv.Itoa(int(pc.port))),
		item(MetadataEnableGuestAttributes, "TRUE"),
	}}, nil
}

// buildInstance returns the instance to insert. natIP is the static
// address the VM sends and receives traffic on.
func buildInstance(project string, s spec, o backend.Ownership, natIP string, md *computepb.Metadata) *computepb.Instance {
	nic := &computepb.NetworkInterface{
		Network: proto.String("projects/" + project + "/global/networks/" + s.network),
		AccessConfigs: []*computepb.AccessConfig{{
			Name: proto.String(natName), Type: proto.String(natType), NatIP: proto.String(natIP),
		}},
	}
	if s.subnetwork != "" {
		nic.Subnetwork = proto.String("projects/" + project + "/regions/" + s.region + "/subnetworks/" + s.subnetwork)
	}
	inst := &computepb.Instance{
		Name:        proto.String(s.name),
		Description: proto.String("Egress proxy " + o.Owner.Namespace + "/" + o.Owner.Name + ", managed by " + backend.ManagedByValue),
		MachineType: proto.String("zones/" + s.zone + "/machineTypes/" + s.machineType),
		Disks: []*computepb.AttachedDisk{{
			Boot: proto.Bool(true), AutoDelete: proto.Bool(true),
			InitializeParams: &computepb.AttachedDiskInitializeParams{
				SourceImage: proto.String(s.image), DiskSizeGb: proto.Int64(diskSizeGB),
			},
		}},
		NetworkInterfaces: []*computepb.NetworkInterface{nic},
		Tags:              &computepb.Tags{Items: s.tags},
		Labels:            instanceLabels(s.labels, o),
		Metadata:          md,
	}
	if s.sa != "" {
		inst.ServiceAccounts = []*computepb.ServiceAccount{{Email: proto.String(s.sa), Scopes: proxyScopes()}}
	}
	return inst
}

// instanceDigest identifies what an insert asks for, without the
// credentials: an htpasswd file has a random salt, and a request ID must not
// change between two reconciles that ask for the same instance.
func instanceDigest(inst *computepb.Instance) string {
	c := proto.CloneOf(inst)
	items := c.GetMetadata().GetItems()[:0]
	for _, it := range c.GetMetadata().GetItems() {
		if k := it.GetKey(); k == MetadataConfigChecksum || k == MetadataGuestVersion {
			items = append(items, it)
		}
	}
	if c.Metadata != nil {
		c.Metadata.Items = items
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(c) // A valid message always marshals.
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// buildAddress returns the static external address to reserve.
func buildAddress(s spec, o backend.Ownership) *computepb.Address {
	return &computepb.Address{
		Name:        proto.String(s.addressName),
		Description: proto.String("Egress IP of proxy " + o.Owner.Namespace + "/" + o.Owner.Name + ", managed by " + backend.ManagedByValue),
		AddressType: proto.String("EXTERNAL"),
		Labels:      ownershipLabels(o),
	}
}

// buildFirewall returns the rule that admits the allowed clients, and only
// them, to the proxy port of VMs tagged with the instance name.
func buildFirewall(project string, s spec, cidrs []string, o backend.Ownership) (*computepb.Firewall, error) {
	ranges := ipv4Ranges(cidrs)
	if len(ranges) == 0 {
		return nil, backend.Permanent(errors.New(errNoIPv4CIDR))
	}
	return &computepb.Firewall{
		Name:         proto.String(s.name),
		Description:  proto.String(firewallDescription(o)),
		Network:      proto.String("projects/" + project + "/global/networks/" + s.network),
		Direction:    proto.String("INGRESS"),
		Priority:     proto.Int32(1000),
		Allowed:      []*computepb.Allowed{{IPProtocol: proto.String("tcp"), Ports: []string{strconv.Itoa(int(s.port))}}},
		SourceRanges: ranges,
		TargetTags:   []string{s.name},
		Disabled:     proto.Bool(false),
	}, nil
}

// ipv4Ranges returns the IPv4 ranges among cidrs, canonical (host bits
// cleared), sorted and unique. The VM has no IPv6 address, and a firewall
// rule may not mix IPv4 and IPv6 source ranges.
func ipv4Ranges(cidrs []string) []string {
	set := map[string]bool{}
	for _, c := range cidrs {
		if p, ok := canonicalCIDR(c); ok && p.Addr().Is4() {
			set[p.String()] = true
		}
	}
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// canonicalCIDR parses a CIDR or a bare address (which GCE accepts as a /32).
func canonicalCIDR(c string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(c); err == nil {
		return p.Masked(), true
	}
	if a, err := netip.ParseAddr(c); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	return netip.Prefix{}, false
}
