/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"encoding/base64"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// googleLabelPrefix marks labels Google services add to VMs (VM Manager's
// goog-ops-agent-policy, for example). They are not drift.
const googleLabelPrefix = "goog-"

// wantInstance is what a running instance is compared with. Zone, image and
// network are immutable in the API, so they are not compared.
type wantInstance struct {
	MachineType    string
	Labels         map[string]string
	Tags           []string
	ServiceAccount string
	// Scopes of the service account; none without one.
	Scopes []string
	// NatIP is the static address; empty when it is missing, which the
	// address check reports.
	NatIP          string
	ConfigChecksum string
	Port           int32
	GuestVersion   string
	Credentials    backend.Credentials
}

// wanted returns what an instance of s should look like.
func wanted(s spec, d Desired, checksum, natIP string) wantInstance {
	var scopes []string
	if s.sa != "" {
		scopes = proxyScopes()
	}
	return wantInstance{
		Scopes:         scopes,
		MachineType:    s.machineType,
		Labels:         instanceLabels(s.labels, d.Ownership),
		Tags:           s.tags,
		ServiceAccount: s.sa,
		NatIP:          natIP,
		ConfigChecksum: checksum,
		Port:           s.port,
		GuestVersion:   guestVersion,
		Credentials:    d.Credentials,
	}
}

// instanceDiff lists how got differs from w: what only a new VM changes
// (replaceDiff), what Update sets on the running VM (labelDiff, tagDiff),
// then what the running guest applies (liveDiff).
func instanceDiff(v *squid.Verifier, w wantInstance, got *computepb.Instance) []string {
	d := replaceDiff(w, got)
	d = append(d, labelDiff(w.Labels, got.GetLabels())...)
	d = append(d, tagDiff(w.Tags, got.GetTags().GetItems())...)
	return append(d, liveDiff(v, w, got)...)
}

// replaceDiff lists the differences that replace the VM. Compute Engine
// cannot change the machine type or service account without a stop, a new
// NAT IP or guest version means new files outside squid's (the guest
// version is bumped when the set-up changes; see guestVersion), and a VM
// that lost its user-data or startup-script would not come back after a
// reboot. Labels and network tags are not here: instances.setLabels and
// setTags change them on the running VM.
func replaceDiff(w wantInstance, got *computepb.Instance) []string {
	var d []string
	if g := lastSegment(got.GetMachineType()); g != w.MachineType {
		d = append(d, fmt.Sprintf("machine type is %s, want %s", g, w.MachineType))
	}
	if g := serviceAccount(got); g != w.ServiceAccount {
		d = append(d, fmt.Sprintf("service account is %q, want %q", g, w.ServiceAccount))
	}
	if g := scopesOf(got); !slices.Equal(g, sortedSet(w.Scopes)) {
		d = append(d, fmt.Sprintf("service account scopes are %v, want %v", g, sortedSet(w.Scopes)))
	}
	if g := natIP(got); w.NatIP != "" && g != w.NatIP {
		d = append(d, fmt.Sprintf("external IP is %q, want the static address %s", g, w.NatIP))
	}
	if g := metadataValue(got, MetadataGuestVersion); g != w.GuestVersion {
		d = append(d, fmt.Sprintf("metadata %s is %q, want %q", MetadataGuestVersion, g, w.GuestVersion))
	}
	for _, k := range []string{MetadataUserData, MetadataStartupScript} {
		if metadataValue(got, k) == "" {
			d = append(d, fmt.Sprintf("metadata %s is missing", k))
		}
	}
	return d
}

// liveDiff lists the differences the guest applies without a restart:
// Update writes new metadata (instances.setMetadata) and the guest's
// watcher hands the new squid.conf and htpasswd file to squid.
func liveDiff(v *squid.Verifier, w wantInstance, got *computepb.Instance) []string {
	var d []string
	if g := metadataValue(got, MetadataConfigChecksum); g != w.ConfigChecksum {
		d = append(d, fmt.Sprintf("metadata %s is %q, want %q", MetadataConfigChecksum, g, w.ConfigChecksum))
	}
	if conf, err := base64.StdEncoding.DecodeString(metadataValue(got, MetadataSquidConf)); err != nil || squid.Checksum(conf) != w.ConfigChecksum {
		d = append(d, fmt.Sprintf("metadata %s is not the rendered configuration", MetadataSquidConf))
	}
	if g := metadataValue(got, MetadataPort); g != strconv.Itoa(int(w.Port)) {
		d = append(d, fmt.Sprintf("metadata %s is %q, want \"%d\"", MetadataPort, g, w.Port))
	}
	if w.Credentials.Username != "" && !v.HtpasswdMatches([]byte(metadataValue(got, MetadataHtpasswd)), w.Credentials.Username, w.Credentials.Password) {
		d = append(d, fmt.Sprintf("metadata %s does not accept the current credentials", MetadataHtpasswd))
	}
	return d
}

// tagDiff reports network tags that are not want, in any order.
func tagDiff(want, got []string) []string {
	if g, w := sortedSet(got), sortedSet(want); !slices.Equal(g, w) {
		return []string{fmt.Sprintf("network tags are %v, want %v", g, w)}
	}
	return nil
}

// labelDiff lists the labels that are not want. Labels Google adds
// (googleLabelPrefix) are not drift.
func labelDiff(want, got map[string]string) []string {
	var d []string
	for _, k := range sortedKeys(want) {
		if g, ok := got[k]; !ok || g != want[k] {
			d = append(d, fmt.Sprintf("label %s is %q, want %q", k, g, want[k]))
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok && !strings.HasPrefix(k, googleLabelPrefix) {
			d = append(d, fmt.Sprintf("label %s is not wanted", k))
		}
	}
	return d
}

// firewallDiff lists how got differs from want in what decides who may
// connect. Ownership is checked before.
func firewallDiff(want, got *computepb.Firewall) []string {
	var d []string
	if g, w := canonicalRanges(got.GetSourceRanges()), canonicalRanges(want.GetSourceRanges()); !slices.Equal(g, w) {
		d = append(d, fmt.Sprintf("firewall source ranges are %v, want %v", g, w))
	}
	if len(got.GetSourceTags())+len(got.GetSourceServiceAccounts()) > 0 {
		d = append(d, "firewall admits source tags or service accounts")
	}
	if g, w := ruleString(got.GetAllowed()), ruleString(want.GetAllowed()); g != w || len(got.GetDenied()) > 0 {
		d = append(d, fmt.Sprintf("firewall allows %s, want %s", g, w))
	}
	if g, w := sortedSet(got.GetTargetTags()), sortedSet(want.GetTargetTags()); !slices.Equal(g, w) {
		d = append(d, fmt.Sprintf("firewall targets tags %v, want %v", g, w))
	}
	if got.GetDirection() != want.GetDirection() {
		d = append(d, fmt.Sprintf("firewall direction is %s, want %s", got.GetDirection(), want.GetDirection()))
	}
	if got.GetDisabled() {
		d = append(d, "firewall is disabled")
	}
	if g, w := lastSegment(got.GetNetwork()), lastSegment(want.GetNetwork()); g != w {
		d = append(d, fmt.Sprintf("firewall network is %s, want %s", g, w))
	}
	return d
}

func ruleString(rules []*computepb.Allowed) string {
	parts := make([]string, 0, len(rules))
	for _, r := range rules {
		parts = append(parts, r.GetIPProtocol()+":"+strings.Join(sortedSet(r.GetPorts()), ","))
	}
	sort.Strings(parts)
	return "[" + strings.Join(parts, " ") + "]"
}

// canonicalRanges returns ranges with host bits cleared, sorted and unique;
// ones that do not parse are kept as they are, so they show as drift.
func canonicalRanges(ranges []string) []string {
	out := make([]string, 0, len(ranges))
	for _, r := range ranges {
		if p, ok := canonicalCIDR(r); ok {
			r = p.String()
		}
		out = append(out, r)
	}
	return sortedSet(out)
}

func sortedSet(in []string) []string {
	out := slices.Clone(in)
	sort.Strings(out)
	return slices.Compact(out)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// metadataValue returns the value of a metadata key of inst, or "".
func metadataValue(inst *computepb.Instance, key string) string {
	for _, it := range inst.GetMetadata().GetItems() {
		if it.GetKey() == key {
			return it.GetValue()
		}
	}
	return ""
}

// natIP returns the external IP of inst's first interface, or "".
func natIP(inst *computepb.Instance) string {
	for _, n := range inst.GetNetworkInterfaces() {
		for _, ac := range n.GetAccessConfigs() {
			if ip := ac.GetNatIP(); ip != "" {
				return ip
			}
		}
	}
	return ""
}

// internalIP returns the internal IP of inst's first interface, or "".
func internalIP(inst *computepb.Instance) string {
	for _, n := range inst.GetNetworkInterfaces() {
		return n.GetNetworkIP()
	}
	return ""
}

func serviceAccount(inst *computepb.Instance) string {
	for _, sa := range inst.GetServiceAccounts() {
		return sa.GetEmail()
	}
	return ""
}

// scopesOf returns the scopes of inst's service account, sorted.
func scopesOf(inst *computepb.Instance) []string {
	var out []string
	for _, sa := range inst.GetServiceAccounts() {
		out = append(out, sa.GetScopes()...)
	}
	return sortedSet(out)
}
