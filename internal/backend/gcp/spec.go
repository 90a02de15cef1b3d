/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcp

import (
	"regexp"
	"sort"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// Defaults of GCPProxyParameters, the same as the API's, for objects that
// were not defaulted by an API server.
const (
	DefaultMachineType = v1alpha1.DefaultMachineType
	DefaultImage       = v1alpha1.DefaultImage
	DefaultNetwork     = v1alpha1.DefaultNetwork
)

const (
	errFmtName  = "%s %q is not a valid Compute Engine name"
	errFmtZone  = "zone %q is not a Compute Engine zone name such as europe-west1-b"
	errFmtImage = "image %q must look like projects/<project>/global/images/[family/]<name>"
)

// spec is a GCPProxy's parameters with defaults applied and every name that
// ends up in a URL path checked: the REST client does not escape them.
type spec struct {
	name        string
	zone        string
	region      string
	machineType string
	image       string
	network     string
	subnetwork  string
	tags        []string
	labels      map[string]string
	sa          string
	addressName string
	// userAddress is true when spec.address.name names an address the user
	// reserved: it is used, never created or deleted.
	userAddress bool
	retain      bool
	port        int32
}

// Compiled once: every Observe validates its spec, and compiling these on
// each call was a fifteenth of a steady poll's CPU.
var (
	nameRE  = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
	zoneRE  = regexp.MustCompile(`^[a-z]+-[a-z]+[0-9]+-[a-z]$`)
	imageRE = regexp.MustCompile(`^projects/[a-z][-a-z0-9]*/global/images/(family/)?[a-z]([-a-z0-9]*[a-z0-9])?$`)
)

// checkName returns a Permanent error when name is not an RFC 1035 label.
func checkName(what, name string) error {
	if !nameRE.MatchString(name) {
		return backend.Permanent(errors.Errorf(errFmtName, what, name))
	}
	return nil
}

// resolve applies defaults to d's parameters and validates them.
func resolve(d Desired) (spec, error) {
	p := d.Params
	s := spec{
		name:        d.Name,
		zone:        p.Zone,
		region:      regionOf(p.Zone),
		machineType: withDefault(p.MachineType, DefaultMachineType),
		image:       withDefault(p.Image, DefaultImage),
		network:     withDefault(p.Network, DefaultNetwork),
		addressName: d.Name,
		retain:      p.RetainAddressOnDelete,
		port:        d.Proxy.Port,
	}
	if s.port == 0 {
		s.port = backend.DefaultPort
	}
	if p.Subnetwork != nil {
		s.subnetwork = *p.Subnetwork
	}
	if p.ServiceAccountEmail != nil {
		s.sa = *p.ServiceAccountEmail
	}
	if p.Address != nil && p.Address.Name != nil && *p.Address.Name != "" {
		s.addressName, s.userAddress = *p.Address.Name, true
	}
	s.tags = networkTags(d.Name, p.NetworkTags)
	s.labels = map[string]string{}
	for k, v := range p.Labels {
		s.labels[k] = string(v)
	}
	return s, s.validate()
}

func (s spec) validate() error {
	if !zoneRE.MatchString(s.zone) {
		return backend.Permanent(errors.Errorf(errFmtZone, s.zone))
	}
	if !imageRE.MatchString(s.image) {
		return backend.Permanent(errors.Errorf(errFmtImage, s.image))
	}
	checks := [][2]string{
		{"instance name", s.name}, {"machine type", s.machineType}, {"network", s.network}, {"address name", s.addressName},
	}
	if s.subnetwork != "" {
		checks = append(checks, [2]string{"subnetwork", s.subnetwork})
	}
	for _, c := range checks {
		if err := checkName(c[0], c[1]); err != nil {
			return err
		}
	}
	return nil
}

// networkTags returns the VM's tags: the user's plus the instance name, which
// the firewall rule targets. Sorted and unique, as GCE keeps them.
func networkTags(name string, extra []string) []string {
	set := map[string]bool{name: true}
	for _, t := range extra {
		set[t] = true
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// regionOf returns the region of a zone: europe-west1-b is in europe-west1.
func regionOf(zone string) string {
	if i := strings.LastIndex(zone, "-"); i > 0 {
		return zone[:i]
	}
	return zone
}

func withDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// lastSegment returns what follows the last slash of a link.
func lastSegment(link string) string {
	if i := strings.LastIndex(link, "/"); i >= 0 {
		return link[i+1:]
	}
	return link
}
