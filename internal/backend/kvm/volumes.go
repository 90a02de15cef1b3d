/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"
)

const (
	errFmtLookupPool   = "cannot look up storage pool %s"
	errFmtLookupVolume = "cannot look up volume %s"
	errFmtVolumeXML    = "cannot read the XML of volume %s"
	errFmtParseVolume  = "cannot parse the XML of volume %s"
	errFmtDeleteVolume = "cannot delete volume %s"
	errFmtCreateVolume = "cannot create volume %s"
	errFmtUpload       = "cannot upload the seed into volume %s"
	errMarshalVolume   = "cannot marshal the volume XML"
)

// volume is a volume and its parsed XML.
type volume struct {
	Vol golibvirt.StorageVol
	XML *libvirtxml.StorageVolume
}

// lookupPool returns the pool; a missing pool is NotFound.
func (b *Backend) lookupPool(ctx context.Context, name string) (golibvirt.StoragePool, error) {
	p, err := b.svc.StoragePoolLookupByName(ctx, name)
	return p, classify(errors.Wrapf(err, errFmtLookupPool, name))
}

// lookupVolume returns a volume with its XML; a missing one is NotFound.
func (b *Backend) lookupVolume(ctx context.Context, pool golibvirt.StoragePool, name string) (volume, error) {
	v, err := b.svc.StorageVolLookupByName(ctx, pool, name)
	if err != nil {
		return volume{}, classify(errors.Wrapf(err, errFmtLookupVolume, name))
	}
	desc, err := b.svc.StorageVolGetXMLDesc(ctx, v)
	if err != nil {
		return volume{}, classify(errors.Wrapf(err, errFmtVolumeXML, name))
	}
	x := &libvirtxml.StorageVolume{}
	if err := x.Unmarshal(desc); err != nil {
		return volume{}, errors.Wrapf(err, errFmtParseVolume, name)
	}
	return volume{Vol: v, XML: x}, nil
}

// volumeXML is lookupVolume for callers that only read the XML.
func (b *Backend) volumeXML(ctx context.Context, pool golibvirt.StoragePool, name string) (*libvirtxml.StorageVolume, error) {
	v, err := b.lookupVolume(ctx, pool, name)
	return v.XML, err
}

// deleteVolume deletes a volume if it exists.
func (b *Backend) deleteVolume(ctx context.Context, pool golibvirt.StoragePool, name string) error {
	v, err := b.svc.StorageVolLookupByName(ctx, pool, name)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return classify(errors.Wrapf(err, errFmtLookupVolume, name))
	}
	if err := b.svc.StorageVolDelete(ctx, v); err != nil && !isNotFound(err) {
		return classify(errors.Wrapf(err, errFmtDeleteVolume, name))
	}
	return nil
}

// createVolume creates a volume from x and returns it with its XML as
// libvirt completed it (the path).
func (b *Backend) createVolume(ctx context.Context, pool golibvirt.StoragePool, x *libvirtxml.StorageVolume) (volume, error) {
	doc, err := x.Marshal()
	if err != nil {
		return volume{}, errors.Wrap(err, errMarshalVolume)
	}
	if _, err := b.svc.StorageVolCreateXML(ctx, pool, doc); err != nil {
		return volume{}, classify(errors.Wrapf(err, errFmtCreateVolume, x.Name))
	}
	return b.lookupVolume(ctx, pool, x.Name)
}

// volumePath is where a volume lives on the host.
func volumePath(v volume) string {
	if v.XML.Target == nil {
		return ""
	}
	return v.XML.Target.Path
}

// volumeFormat is a volume's format, raw when libvirt does not say.
func volumeFormat(v volume) string {
	if v.XML.Target == nil || v.XML.Target.Format == nil || v.XML.Target.Format.Type == "" {
		return "raw"
	}
	return v.XML.Target.Format.Type
}

// toBytes converts a libvirt volume size; libvirt reports bytes.
func toBytes(s *libvirtxml.StorageVolumeSize) uint64 {
	if s == nil {
		return 0
	}
	switch strings.ToLower(s.Unit) {
	case "", "b", "bytes":
		return s.Value
	case "k", "kib":
		return s.Value << 10
	case "m", "mib":
		return s.Value << 20
	case "g", "gib":
		return s.Value << 30
	case "t", "tib":
		return s.Value << 40
	case "kb":
		return s.Value * 1000
	case "mb":
		return s.Value * 1000 * 1000
	case "gb":
		return s.Value * 1000 * 1000 * 1000
	}
	return s.Value
}

// changeTime is a volume's inode change time; libvirt writes it as
// seconds.nanoseconds. It is zero when the pool does not report it.
func changeTime(t *libvirtxml.StorageVolumeTarget) time.Time {
	if t == nil || t.Timestamps == nil {
		return time.Time{}
	}
	sec, frac, _ := strings.Cut(t.Timestamps.Ctime, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || s <= 0 {
		return time.Time{}
	}
	ns, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
	return time.Unix(s, ns).UTC()
}
