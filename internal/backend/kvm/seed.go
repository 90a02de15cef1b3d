/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"bytes"
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/kdomanski/iso9660"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/cloudinit"
	"github.com/egressproxy/provider-egressproxy/internal/squid"
)

// SeedLabel is the volume label cloud-init's NoCloud datasource looks for.
const SeedLabel = "cidata"

// Files on the seed.
const (
	fileUserData      = "user-data"
	fileMetaData      = "meta-data"
	fileNetworkConfig = "network-config"
)

const (
	errRender         = "cannot render the squid configuration"
	errHtpasswd       = "cannot hash the proxy credentials"
	errUserData       = "cannot build the cloud-init user-data"
	errNetworkConfig  = "cannot build the cloud-init network-config"
	errMetaData       = "cannot build the cloud-init meta-data"
	errNoUserDataRead = "userDataSecretRef is set but this provider cannot read Secrets for the kvm backend"
	errReadUserData   = "cannot read the userDataSecretRef Secret"
	errISO            = "cannot build the seed ISO"
)

// UserDataSource reads the user's own user-data that a KVMProxy's
// userDataSecretRef selects, in the KVMProxy's namespace.
type UserDataSource func(ctx context.Context, namespace string, ref commonv1alpha1.LocalSecretKeySelector) ([]byte, error)

// seed is what the seed ISO carries, and what the domain's metadata records
// about it.
type seed struct {
	UserData       []byte
	MetaData       []byte
	NetworkConfig  []byte
	ConfigChecksum string
	Htpasswd       string
	// Guest is guestVersion when the seed writes the guest files; "" with
	// the user's own user-data.
	Guest string
}

// userConfig returns the user's own user-data, or nil when d has none.
func (b *Backend) userConfig(ctx context.Context, d Desired) ([]byte, error) {
	ref := d.Params.UserDataSecretRef
	if ref == nil {
		return nil, nil
	}
	if b.userData == nil {
		return nil, backend.Permanent(errors.New(errNoUserDataRead))
	}
	ud, err := b.userData(ctx, d.Ownership.Owner.Namespace, *ref)
	return ud, errors.Wrap(err, errReadUserData)
}

// configChecksum is the checksum of what the instance of d must run: the
// squid configuration, or the user's own user-data. It hashes no password,
// so Observe can compute it cheaply; credentials are checked against the
// htpasswd hash in the metadata instead.
func (b *Backend) configChecksum(ctx context.Context, d Desired) (string, error) {
	ud, err := b.userConfig(ctx, d)
	if err != nil || ud != nil {
		return squid.Checksum(ud), err
	}
	// Rendered only when the parameters are new (squid.Sums): Observe
	// asks on every poll.
	sum, err := b.sums.Sum(squidConfig(d))
	if err != nil {
		return "", backend.Permanent(errors.Wrap(err, errRender))
	}
	return sum, nil
}

// buildSeed renders the cloud-init documents of d's instance. The
// instance-id is the domain name: a replaced VM gets a fresh overlay, so
// cloud-init runs again anyway.
func (b *Backend) buildSeed(ctx context.Context, d Desired, mac string) (seed, error) {
	nc, err := cloudinit.NetworkConfigForMAC(mac)
	if err != nil {
		return seed{}, backend.Permanent(errors.Wrap(err, errNetworkConfig))
	}
	md, err := cloudinit.MetaData(d.Name, d.Name)
	if err != nil {
		return seed{}, backend.Permanent(errors.Wrap(err, errMetaData))
	}
	s := seed{MetaData: md, NetworkConfig: nc}
	ud, err := b.userConfig(ctx, d)
	if err != nil {
		return seed{}, err
	}
	if ud != nil {
		s.UserData, s.ConfigChecksum = ud, squid.Checksum(ud)
		return s, nil
	}
	conf, err := squid.Render(squidConfig(d))
	if err != nil {
		return seed{}, backend.Permanent(errors.Wrap(err, errRender))
	}
	ht, err := b.verifier.HtpasswdCost(d.Credentials.Username, d.Credentials.Password, backend.HtpasswdCost(d.Credentials))
	if err != nil {
		return seed{}, backend.Permanent(errors.Wrap(err, errHtpasswd))
	}
	s.UserData, err = cloudinit.UserData(cloudinit.Input{Hostname: d.Name, SquidConf: conf, Htpasswd: ht})
	if err != nil {
		return seed{}, backend.Permanent(errors.Wrap(err, errUserData))
	}
	s.ConfigChecksum, s.Htpasswd, s.Guest = squid.Checksum(conf), string(ht), guestVersion
	return s, nil
}

// iso builds the NoCloud seed: an ISO 9660 image labelled cidata holding
// user-data, meta-data and network-config. The writer stages the files in a
// temporary directory under os.TempDir (TMPDIR, else /tmp) and removes it, so
// the provider needs a small writable TMPDIR: with readOnlyRootFilesystem,
// a memory emptyDir at /tmp (examples/runtime/provider-egressproxy.yaml).
func (s seed) iso() ([]byte, error) {
	w, err := iso9660.NewWriter()
	if err != nil {
		return nil, errors.Wrap(err, errISO)
	}
	defer w.Cleanup() //nolint:errcheck // Only a temporary directory is left.
	for _, f := range []struct {
		name string
		data []byte
	}{{fileUserData, s.UserData}, {fileMetaData, s.MetaData}, {fileNetworkConfig, s.NetworkConfig}} {
		if err := w.AddFile(bytes.NewReader(f.data), f.name); err != nil {
			return nil, errors.Wrap(err, errISO)
		}
	}
	var buf bytes.Buffer
	if err := w.WriteTo(&buf, SeedLabel); err != nil {
		return nil, errors.Wrap(err, errISO)
	}
	return buf.Bytes(), nil
}
