/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package cluster

import (
	"context"
	"encoding/base64"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/dialer"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kvm/kvmdesc"
	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/guestimage"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/libvirtd"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/traffic"
)

// BackendKVM is the kvm backend.
const BackendKVM = Backend(kvmdesc.Name)

// Its test double is a private libvirtd booting the real guest image under
// QEMU. A first run installs libvirt and QEMU with apt.
var _ = registerDouble(BackendKVM, double{
	optional:  true,
	cannotRun: needsRoot,
	step: func(c *Cluster) step {
		return step{name: "private libvirtd and kvm ProviderConfig", fn: c.setupKVM, timeout: 12 * time.Minute}
	},
	adaptInput: kvmInput,
	site: func(c *Cluster) (TrafficSite, bool) {
		if c.Libvirt == nil {
			return TrafficSite{}, false
		}
		return TrafficSite{NetNS: c.Libvirt.NetNS, ClientCIDR: c.Libvirt.Prepared.Subnet.String()}, true
	},
})

const (
	errFmtKVM    = "cannot set up the private libvirtd: %s"
	errFmtGuest  = "cannot install the guest image %s in the pool"
	errKVMSecret = "cannot store the kvm backend's SSH key and known_hosts"
)

// The sandbox's KVM proxies.
const (
	// GuestImageVolume is the base volume of KVM proxies: a copy of the
	// guest image hack/guest-image.sh builds (Debian, cloud-init, squid,
	// the QEMU guest agent).
	GuestImageVolume = "guest.qcow2"
	// guestDiskGiB is larger than the image, so cloud-init grows the root.
	guestDiskGiB = 3
)

// ErrMissing is wrapped by a Start error whose cause is a component this
// machine cannot run (a private libvirtd without root, say): tests skip on
// it where they would fail on any other.
var ErrMissing = errors.New("a component cannot run on this machine")

// Libvirt is a running private libvirtd (hack/libvirt-sandbox.sh).
type Libvirt struct {
	// Daemon is the sandbox: its Base folder holds its logs.
	Daemon *libvirtd.Daemon
	// URI reaches the daemon's socket from this process (the host).
	URI string
	// SSH is the sandbox's sshd, through which the provider's pods reach
	// the daemon: ProviderURI, with the key and known_hosts of the Secret
	// KVMSSHSecret.
	SSH         *SSHD
	ProviderURI string
	// Prepared is its storage pool and NAT network.
	Prepared libvirtd.Prepared
	// NetNS is the path of the sandbox's network namespace: the VMs' NAT
	// network, and where a client and an origin for them run
	// (package traffic's addresses are bound there).
	NetNS string
}

// kvmSandboxInput is the kvm input of a Composition for what the sandbox
// has: QEMU without KVM (TCG), the real guest image, the NAT network. The
// provider's serve probe makes a VM Ready only once squid in the guest
// serves its configuration, about 30-40 s after boot under TCG. Two vCPUs
// (two TCG threads) get the guest a fairer share of a busy host.
func kvmSandboxInput() map[string]any {
	size := map[string]any{"vcpus": int64(2), "memoryMiB": int64(guestimage.RecommendedMemoryMiB)}
	return map[string]any{
		"pool":            libvirtd.DefaultPool,
		"baseImageVolume": GuestImageVolume,
		"network":         map[string]any{"name": libvirtd.DefaultNetwork},
		"domainType":      "qemu",
		"diskGiB":         int64(guestDiskGiB),
		"sizes":           map[string]any{"small": size, "medium": size, "large": size},
	}
}

// kvmInput makes the proxies boot in the sandbox (kvmSandboxInput).
func kvmInput(_ *Cluster, input map[string]any) error {
	return unstructured.SetNestedField(input, kvmSandboxInput(), "kvm")
}

// KVMSandboxComposition returns a Composition of the claim API named name,
// with labels, for the sandbox's kvm input and without guardrails: the e2e
// allows a private destination with it, to see squid refuse it.
func KVMSandboxComposition(name string, labels map[string]string) *unstructured.Unstructured {
	l := map[string]any{}
	for k, v := range labels {
		l[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.crossplane.io/v1",
		"kind":       "Composition",
		"metadata":   map[string]any{"name": name, "labels": l},
		"spec": map[string]any{
			"compositeTypeRef":                  map[string]any{"apiVersion": "egressproxy.io/v1alpha1", "kind": "XEgressProxy"},
			"writeConnectionSecretsToNamespace": CrossplaneNamespace,
			"mode":                              "Pipeline",
			"pipeline": []any{map[string]any{
				"step":        "compose-proxy",
				"functionRef": map[string]any{"name": FunctionName},
				"input": map[string]any{
					"apiVersion":        "egressproxy.fn.egressproxy.io/v1alpha1",
					"kind":              "Input",
					"backend":           string(BackendKVM),
					"providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": ProviderConfigName},
					"kvm":               kvmSandboxInput(),
				},
			}},
		},
	}}
}

// KVMSSHSecret, in CrossplaneNamespace, holds the key and known_hosts of
// the kvm backend's ClusterProviderConfig default.
const KVMSSHSecret = "kvm-ssh"

// setupKVM starts a private libvirtd with a pool, a NAT network and the guest
// image as base volume, binds package traffic's addresses in its network
// namespace, starts an sshd on its host, points the kvm backend's
// ClusterProviderConfig default at the daemon over qemu+ssh and adapts the
// kvm Compositions to it.
func (c *Cluster) setupKVM(ctx context.Context) (err error) {
	t := testenv.NewOutside("cluster", c.logf)
	defer c.recoverOutside(t, &err, errFmtKVM)
	image := guestimage.Path(t)
	d := libvirtd.Start(t)
	// The sandbox is no child of this process: if this one dies, the
	// watchdog stops the sandbox.
	c.sup.onAbort(shellQuote(filepath.Join(testenv.RepoRoot(), "hack", "libvirt-sandbox.sh")) + " stop " + shellQuote(d.Base))
	c.sup.removeOnAbort(d.Base)
	c.Libvirt = &Libvirt{Daemon: d, URI: d.URI("qemu"), Prepared: d.Prepare(t, libvirtd.PrepareOptions{}), NetNS: d.NetNS(t)}
	if err := installGuestImage(t, d, c.Libvirt.Prepared, image); err != nil {
		return err
	}
	if err := traffic.AddAddresses(c.Libvirt.NetNS, traffic.AllowedOrigin, traffic.OtherOrigin, traffic.StableOrigin, traffic.OutsideClient); err != nil {
		return err
	}
	// The provider runs as a pod: it reaches the daemon as a remote
	// libvirt host, over qemu+ssh to a real sshd in the sandbox, the host
	// key pinned in known_hosts (docs/platform.md, "libvirt from the
	// provider pod").
	sshd, err := c.startSSHD(ctx, t, d)
	if err != nil {
		return err
	}
	c.Libvirt.SSH = sshd
	c.Libvirt.ProviderURI = KVMSSHURI(sshd.User, sshd.Addr, d.Socket)
	// Applied, not created: a reused cluster's Secret holds the keys of a
	// previous run.
	sec := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"namespace": CrossplaneNamespace, "name": KVMSSHSecret},
		"data": map[string]any{
			dialer.KeySSHPrivateKey: base64.StdEncoding.EncodeToString(sshd.PrivateKey),
			dialer.KeyKnownHosts:    base64.StdEncoding.EncodeToString(sshd.KnownHosts),
		},
	}}
	if err := Apply(ctx, c.Client, sec); err != nil {
		return errors.Wrap(err, errKVMSecret)
	}
	return Apply(ctx, c.Client, KVMSSHProviderConfig(ProviderConfigName, c.Libvirt.ProviderURI, CrossplaneNamespace, KVMSSHSecret))
}

// KVMSSHURI is a qemu+ssh URI for user at addr (host:port) and the
// libvirt socket on that host.
func KVMSSHURI(user, addr, socket string) string {
	u := url.URL{Scheme: "qemu+ssh", User: url.User(user), Host: addr, Path: "/system", RawQuery: url.Values{"socket": {socket}}.Encode()}
	return u.String()
}

// KVMSSHProviderConfig returns a ClusterProviderConfig of the kvm backend
// for a qemu+ssh URI, with the key and known_hosts in the Secret
// namespace/secret.
func KVMSSHProviderConfig(name, uri, namespace, secret string) *unstructured.Unstructured {
	u := KVMProviderConfig("ClusterProviderConfig", "", name, uri)
	_ = unstructured.SetNestedMap(u.Object, map[string]any{
		"source": "Secret", "secretRef": map[string]any{"name": secret, "namespace": namespace},
	}, "spec", "credentials")
	return u
}

// KVMProviderConfig returns a (Cluster)ProviderConfig of the kvm backend
// for a libvirt URI, without credentials (a local socket).
func KVMProviderConfig(kind, namespace, name, uri string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kvm.m.egressproxy.io/v1alpha1",
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"uri":         uri,
			"credentials": map[string]any{"source": "None"},
		},
	}}
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u
}

// installGuestImage copies the guest image into the pool. A copy, not a
// link: nothing libvirt or a VM does may change the cached image.
func installGuestImage(t testing.TB, d *libvirtd.Daemon, p libvirtd.Prepared, image string) error {
	dst := filepath.Join(p.PoolPath, GuestImageVolume)
	if err := copyFile(image, dst); err != nil {
		return errors.Wrapf(err, errFmtGuest, image)
	}
	return errors.Wrapf(d.Dial(t).StoragePoolRefresh(p.Pool, 0), errFmtGuest, image)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src) //nolint:gosec // The cached image.
	if err != nil {
		return err
	}
	defer in.Close() //nolint:errcheck // Read-only.

	out, err := os.Create(dst) //nolint:gosec // The sandbox's pool.
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// recoverOutside, deferred by a step that uses test helpers through an
// Outside t, turns their failure into *err (errFmt names the step, %s the
// failure; a skip wraps ErrMissing) and runs t's cleanups, or keeps them
// for Stop when the step succeeded.
func (c *Cluster) recoverOutside(t *testenv.Outside, err *error, errFmt string) {
	r := recover()
	if r == nil {
		if *err != nil {
			t.RunCleanups()
			return
		}
		c.cleanups = append(c.cleanups, t.RunCleanups)
		return
	}
	t.RunCleanups()
	f, ok := r.(testenv.OutsideFailure)
	if !ok {
		panic(r)
	}
	*err = errors.Errorf(errFmt, f.Msg)
	if f.Skip {
		*err = errors.Wrap(ErrMissing, (*err).Error())
	}
}
