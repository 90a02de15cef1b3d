/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"encoding/xml"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
)

// MetadataNamespace is the XML namespace of the element the backend keeps in
// a domain's <metadata>: libvirt requires one namespaced element per
// application there, and keeps it across redefinitions and restarts.
const MetadataNamespace = "https://egressproxy.io/xmlns/libvirt/v1alpha1"

const (
	metadataPrefix  = "egressproxy"
	metadataElement = "instance"

	errMarshalMetadata = "cannot marshal the domain metadata"
	errParseMetadata   = "cannot parse the domain metadata"
)

// metadata is what a domain says about itself: whose it is, when it was
// made, and what it runs.
type metadata struct {
	Ownership backend.Ownership
	CreatedAt time.Time
	// Pool holds the domain's volumes, so Delete finds them from the name.
	Pool string
	// ConfigChecksum of the squid configuration, or of the user's own
	// user-data.
	ConfigChecksum string
	// Htpasswd is the file on the seed (a bcrypt hash, never a password),
	// so Observe can tell whether the credentials changed. Empty with the
	// user's own user-data.
	Htpasswd string
	// Volumes are the volumes of Pool the domain owns. Create records them
	// before it creates them, having checked they did not exist, so Delete
	// removes only volumes this instance made, never one that merely has
	// the same name. Nil on domains made before it was recorded.
	Volumes []string
	// Guest is the version of the guest files the seed wrote
	// (guestVersion); "" on domains made before the guest could apply a
	// configuration live, which are replaced instead.
	Guest string
	// labels are the ownership labels as read back, for backend.OwnedBy.
	labels map[string]string
}

// ownedBy reports whether the metadata says the domain belongs to want.
func (m metadata) ownedBy(want backend.Ownership) bool {
	return backend.OwnedBy(backend.CloudLabelKeys, m.labels, want)
}

type labelXML struct {
	Key   string `xml:"key,attr"`
	Value string `xml:"value,attr"`
}

// metadataOut writes the element with an explicit prefix, as libvirt wants.
type metadataOut struct {
	XMLName        xml.Name   `xml:"egressproxy:instance"`
	NS             string     `xml:"xmlns:egressproxy,attr"`
	Labels         []labelXML `xml:"egressproxy:label"`
	CreatedAt      string     `xml:"egressproxy:createdAt"`
	Pool           string     `xml:"egressproxy:pool"`
	ConfigChecksum string     `xml:"egressproxy:configChecksum"`
	Htpasswd       string     `xml:"egressproxy:htpasswd,omitempty"`
	Volumes        []string   `xml:"egressproxy:volume"`
	Guest          string     `xml:"egressproxy:guest,omitempty"`
}

// metadataIn reads the element whatever prefix libvirt gave it back.
type metadataIn struct {
	Labels         []labelXML `xml:"label"`
	CreatedAt      string     `xml:"createdAt"`
	Pool           string     `xml:"pool"`
	ConfigChecksum string     `xml:"configChecksum"`
	Htpasswd       string     `xml:"htpasswd"`
	Volumes        []string   `xml:"volume"`
	Guest          string     `xml:"guest"`
}

// marshal returns the element for a domain's <metadata>.
func (m metadata) marshal() (string, error) {
	labels := m.Ownership.Labels(backend.CloudLabelKeys)
	out := metadataOut{
		NS:             MetadataNamespace,
		CreatedAt:      m.CreatedAt.UTC().Format(time.RFC3339),
		Pool:           m.Pool,
		ConfigChecksum: m.ConfigChecksum,
		Htpasswd:       m.Htpasswd,
		Volumes:        m.Volumes,
		Guest:          m.Guest,
	}
	for _, k := range sortedKeys(labels) {
		out.Labels = append(out.Labels, labelXML{Key: k, Value: labels[k]})
	}
	b, err := xml.Marshal(out)
	return string(b), errors.Wrap(err, errMarshalMetadata)
}

// metadataSet is the element as DomainSetMetadata takes it: libvirt adds
// its own prefix for the namespace and refuses an element that declares
// that prefix already, so the namespace is the default one here.
type metadataSet struct {
	XMLName        xml.Name
	Labels         []labelXML `xml:"label"`
	CreatedAt      string     `xml:"createdAt"`
	Pool           string     `xml:"pool"`
	ConfigChecksum string     `xml:"configChecksum"`
	Htpasswd       string     `xml:"htpasswd,omitempty"`
	Volumes        []string   `xml:"volume"`
	Guest          string     `xml:"guest,omitempty"`
}

// setElement returns the element for DomainSetMetadata.
func (m metadata) setElement() (string, error) {
	out := metadataSet{
		XMLName:        xml.Name{Space: MetadataNamespace, Local: metadataElement},
		CreatedAt:      m.CreatedAt.UTC().Format(time.RFC3339),
		Pool:           m.Pool,
		ConfigChecksum: m.ConfigChecksum,
		Htpasswd:       m.Htpasswd,
		Volumes:        m.Volumes,
		Guest:          m.Guest,
	}
	labels := m.Ownership.Labels(backend.CloudLabelKeys)
	for _, k := range sortedKeys(labels) {
		out.Labels = append(out.Labels, labelXML{Key: k, Value: labels[k]})
	}
	b, err := xml.Marshal(out)
	return string(b), errors.Wrap(err, errMarshalMetadata)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// parseMetadata finds our element in the inner XML of a domain's
// <metadata>, next to other applications' elements. ok is false when there
// is none or its labels do not mark the domain as ours.
func parseMetadata(inner string) (metadata, bool, error) {
	d := xml.NewDecoder(strings.NewReader(inner))
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return metadata{}, false, nil
		}
		if err != nil {
			return metadata{}, false, errors.Wrap(err, errParseMetadata)
		}
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Space != MetadataNamespace || se.Name.Local != metadataElement {
			continue
		}
		var in metadataIn
		if err := d.DecodeElement(&in, &se); err != nil {
			return metadata{}, false, errors.Wrap(err, errParseMetadata)
		}
		return in.metadata()
	}
}

func (in metadataIn) metadata() (metadata, bool, error) {
	labels := make(map[string]string, len(in.Labels))
	for _, l := range in.Labels {
		labels[l.Key] = l.Value
	}
	o, ok := backend.OwnershipFromLabels(backend.CloudLabelKeys, labels)
	if !ok {
		return metadata{}, false, nil
	}
	m := metadata{Ownership: o, Pool: in.Pool, ConfigChecksum: in.ConfigChecksum, Htpasswd: in.Htpasswd, Volumes: in.Volumes, Guest: in.Guest, labels: labels}
	// A creation time that does not parse stays zero, which the garbage
	// collector never collects.
	if t, err := time.Parse(time.RFC3339, in.CreatedAt); err == nil {
		m.CreatedAt = t
	}
	return m, true, nil
}
