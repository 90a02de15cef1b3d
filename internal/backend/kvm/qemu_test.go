/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kvm

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/go-cmp/cmp"
	"github.com/kdomanski/iso9660"

	commonv1alpha1 "github.com/egressproxy/provider-egressproxy/apis/common/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/dialer"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/libvirtd"
)

// The lifecycle suite runs real QEMU (TCG) domains on a private libvirtd with
// a NAT network. The base image is blank, so the VM boots iPXE from the
// network first: that is enough for a real DHCP lease, not for cloud-init.

const (
	qemuTimeout  = 4 * time.Minute
	readyTimeout = 90 * time.Second
	pollInterval = 500 * time.Millisecond
)

func TestQEMULifecycle(t *testing.T) {
	d := libvirtd.Start(t)
	p := d.Prepare(t, libvirtd.PrepareOptions{})
	des := desired(withPool(libvirtd.DefaultPool), func(x *Desired) {
		x.Params.BaseImageVolume = libvirtd.DefaultBaseVolume
		x.Params.DiskGiB = 1
		x.Params.MemoryMiB = 128
	})
	d.RemoveDomainOnCleanup(t, des.Name)
	b, err := New(dialer.Target{URI: d.URI("qemu")}, WithBootDevices("network", "hd"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	l := d.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), qemuTimeout)
	defer cancel()

	start := time.Now()
	if err := b.Create(ctx, des); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Logf("Create: %s", time.Since(start))
	checkSeed(t, l, p.PoolPath, des)
	if st, err := l.DomainState(des.Name); err != nil || st != golibvirt.DomainRunning {
		t.Errorf("domain state after Create: %v, %v", st, err)
	}

	// Kill the daemon while the VM boots: the pooled connection breaks, calls
	// fail Transient, and after a restart the backend dials again and
	// converges; the VM and its network outlive the daemon.
	d.Kill(t)
	if _, err := b.Observe(ctx, des); backend.ClassOf(err) != backend.ClassTransient {
		t.Errorf("Observe with the daemon down: want Transient, got %v", err)
	}
	d.Restart(t)

	o := waitReady(ctx, t, b, des)
	ip := netip.MustParseAddr(o.EgressIPs[0])
	if !p.Subnet.Contains(ip) || o.Endpoint != ip.String()+":3128" || o.State != commonv1alpha1.StateRunning || !o.UpToDate {
		t.Errorf("Observe when ready: %+v (subnet %s)", o, p.Subnet)
	}
	t.Logf("ready at %s after %s", o.Endpoint, time.Since(start))

	if err := b.Delete(ctx, deleteOnly(des)); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := b.Observe(ctx, des); !backend.IsNotFound(err) {
		t.Errorf("Observe after Delete: want NotFound, got %v", err)
	}
	// The restart broke l; the test's own connection is not pooled.
	vols, _, err := d.Dial(t).StoragePoolListAllVolumes(p.Pool, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vols {
		names = append(names, v.Name)
	}
	if diff := cmp.Diff([]string{libvirtd.DefaultBaseVolume}, names); diff != "" {
		t.Errorf("volumes left in the pool: -want, +got:\n%s", diff)
	}
}

// waitReady polls Observe until the instance is Ready.
func waitReady(ctx context.Context, t *testing.T, b *Backend, d Desired) Observation {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	var o Observation
	var err error
	for time.Now().Before(deadline) {
		if o, err = b.Observe(ctx, d); err == nil && o.Ready {
			return o
		}
		time.Sleep(pollInterval)
	}
	t.Fatalf("not Ready within %s: %+v, %v", readyTimeout, o, err)
	return o
}

// checkSeed reads the seed volume's ISO back from the pool's directory.
// StorageVolDownload would be the libvirt way, but go-libvirt's stream code
// can deadlock on it (an empty "continue" packet ends the read early and the
// final packet then blocks the connection's reader forever).
func checkSeed(t *testing.T, l *golibvirt.Libvirt, poolPath string, d Desired) {
	t.Helper()
	pool, err := l.StoragePoolLookupByName(d.Params.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.StorageVolLookupByName(pool, overlayName(d.Name)); err != nil {
		t.Errorf("overlay volume: %v", err)
	}
	if _, err := l.StorageVolLookupByName(pool, seedName(d.Name)); err != nil {
		t.Fatalf("seed volume: %v", err)
	}
	iso, err := os.ReadFile(filepath.Join(poolPath, seedName(d.Name))) //nolint:gosec // The sandbox's own pool.
	if err != nil {
		t.Fatal(err)
	}
	files := readISO(t, iso)
	if !bytes.HasPrefix(files[fileUserData], []byte("#cloud-config\n")) {
		t.Errorf("user-data on the seed: %q", files[fileUserData])
	}
	if !bytes.Contains(files[fileMetaData], []byte("instance-id: "+d.Name)) {
		t.Errorf("meta-data on the seed: %q", files[fileMetaData])
	}
}

// readISO returns the label check and files of a seed ISO.
func readISO(t *testing.T, iso []byte) map[string][]byte {
	t.Helper()
	img, err := iso9660.OpenImage(bytes.NewReader(iso))
	if err != nil {
		t.Fatalf("seed is no ISO 9660 image: %v", err)
	}
	if label, err := img.Label(); err != nil || label != SeedLabel {
		t.Errorf("seed label: got %q, %v", label, err)
	}
	root, err := img.RootDir()
	if err != nil {
		t.Fatal(err)
	}
	children, err := root.GetChildren()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, c := range children {
		var b bytes.Buffer
		if _, err := b.ReadFrom(c.Reader()); err != nil {
			t.Fatal(err)
		}
		files[c.Name()] = b.Bytes()
	}
	return files
}
