/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package crash

import (
	"context"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"

	golibvirt "github.com/digitalocean/go-libvirt"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/cluster"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/libvirtd"
)

const (
	// The pool and network libvirt's test driver comes with.
	kvmPool    = "default-pool"
	kvmNetwork = "default"
	kvmBase    = "base.qcow2"
	// namePrefix starts the name of every instance (backend.Name).
	namePrefix = "egp-"
)

var _ = registerTarget(cluster.BackendKVM, registration{
	start: kvmTarget,
	// libvirt's test driver has no guest agent: Ready is running with an address.
	flags: []string{"--no-kvm-serve-probe"},
})

// kvmTarget runs a private libvirtd and points the kvm backend's
// ClusterProviderConfig at its test driver, through a proxy of libvirt's
// RPC protocol on loopback's unix socket that can hold the reply to the
// DomainCreate that starts a proxy's VM, the last call Create makes. The
// test driver's state lives as long as one connection to it does: the
// suite keeps its own open, so the provider's restarts lose nothing.
func kvmTarget(t *testing.T, e *env) *target {
	t.Helper()
	if os.Geteuid() != 0 && !testenv.InCI() {
		t.Log("kvm: skipped, a private libvirtd needs root")
		return nil
	}
	ctx := t.Context()
	d := libvirtd.Start(t)
	l := d.DialURI(t, "test")
	pool, err := l.StoragePoolLookupByName(kvmPool)
	if err != nil {
		t.Fatalf("the test driver has no pool %s: %v", kvmPool, err)
	}
	base := `<volume><name>` + kvmBase + `</name><capacity unit='bytes'>1073741824</capacity><target><format type='qcow2'/></target></volume>`
	if _, err := l.StorageVolCreateXML(pool, base, 0); err != nil {
		t.Fatalf("cannot create the base volume: %v", err)
	}
	rp := newRPCProxy(t, d.Socket)
	u, err := url.Parse(d.URI("test"))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("socket", rp.socket)
	u.RawQuery = q.Encode()
	pc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kvm.m.egressproxy.io/v1alpha1",
		"kind":       "ClusterProviderConfig",
		"metadata":   map[string]any{"name": configName},
		"spec": map[string]any{
			"uri":         u.String(),
			"credentials": map[string]any{"source": "None"},
			// The test driver's pool is not the policy's default one.
			"policy": map[string]any{"kvm": map[string]any{"pools": []any{kvmPool}}},
		},
	}}
	if err := cluster.Apply(ctx, e.c.Client, pc); err != nil {
		t.Fatal(err)
	}
	return &target{
		name:       "kvm",
		apiVersion: "kvm.m.egressproxy.io/v1alpha1",
		kind:       "KVMProxy",
		namespace:  "crash-kvm",
		forProvider: func() map[string]any {
			return map[string]any{
				"pool":               kvmPool,
				"baseImageVolume":    kvmBase,
				"diskGiB":            int64(1),
				"memoryMiB":          int64(256),
				"vcpus":              int64(1),
				"network":            map[string]any{"name": kvmNetwork},
				"domainType":         "qemu",
				"allowedClientCIDRs": []any{"10.0.0.0/8"},
			}
		},
		hold: rp.hold,
		instances: func(context.Context) ([]instance, error) {
			doms, _, err := l.ConnectListAllDomains(1, 0)
			if err != nil {
				return nil, err
			}
			var out []instance
			for _, dom := range doms {
				// The test driver comes with a domain of its own.
				if strings.HasPrefix(dom.Name, namePrefix) {
					out = append(out, instance{name: dom.Name, version: hex.EncodeToString(dom.UUID[:])})
				}
			}
			return out, nil
		},
		leftovers: func(context.Context) ([]string, error) {
			return kvmLeftovers(l)
		},
	}
}

// kvmLeftovers lists the domains and volumes of instances.
func kvmLeftovers(l *golibvirt.Libvirt) ([]string, error) {
	var out []string
	doms, _, err := l.ConnectListAllDomains(1, 0)
	if err != nil {
		return nil, err
	}
	for _, dom := range doms {
		if strings.HasPrefix(dom.Name, namePrefix) {
			out = append(out, "domain "+dom.Name)
		}
	}
	pools, _, err := l.ConnectListAllStoragePools(1, 0)
	if err != nil {
		return nil, err
	}
	for _, p := range pools {
		vols, _, err := l.StoragePoolListAllVolumes(p, 1, 0)
		if err != nil {
			return nil, err
		}
		for _, v := range vols {
			if strings.HasPrefix(v.Name, namePrefix) {
				out = append(out, "volume "+p.Name+"/"+v.Name)
			}
		}
	}
	return out, nil
}
